package fencelock

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
)

// Limits of the API.
const (
	ResourceMax = 512
	ValueMax    = 256 // what a leader proclaims, in bytes
	MultiMax    = 16
	PermitsMax  = 1024
	TokenMax    = 1<<53 - 1 // tokens are below 2^53 (storage-guard, fencing.h)
)

// LockRef is the non-secret reference of a lock id that fencelockd reports
// as holder_ref: the first 16 lowercase hex digits of SHA-256 of the
// acquisition's id (the 40-character id with its last six digits, the
// attempt's number, as "0"), shared by every attempt of an acquisition
// and by a reentrant lock's first hold. Comparing it with a status tells whether the
// holder is this lock without anyone seeing the id itself.
func LockRef(lockID string) (string, error) {
	if err := checkLockID(lockID); err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(lockID[:34] + "000000"))
	return hex.EncodeToString(sum[:])[:16], nil
}

func mustRef(id string) string {
	r, _ := LockRef(id)
	return r
}

// OwnerID is a reentrant hold's owner: the first hold's id with its last
// six hex digits zeroed (the lock key's value, what a status names).
func OwnerID(lockID string) string {
	if len(lockID) != 40 {
		return ""
	}
	return lockID[:34] + "000000"
}

func checkLockID(id string) error {
	if len(id) != 40 {
		return fmt.Errorf("fencelock: a lock id is 40 lowercase hex digits, not %q", id)
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fmt.Errorf("fencelock: a lock id is 40 lowercase hex digits, not %q", id)
		}
	}
	return nil
}

func checkResource(r, name string) error {
	if len(r) == 0 || len(r) > ResourceMax || strings.IndexByte(r, 0) >= 0 {
		return fmt.Errorf("fencelock: %s must be 1..%d bytes without NUL, not %d bytes", name, ResourceMax, len(r))
	}
	return nil
}

func checkResources(rs []string) error {
	if len(rs) < 1 || len(rs) > MultiMax {
		return fmt.Errorf("fencelock: resources must hold 1..%d names, not %d", MultiMax, len(rs))
	}
	for _, r := range rs {
		if err := checkResource(r, "each resource"); err != nil {
			return err
		}
		if strings.IndexByte(r, '\n') >= 0 {
			return fmt.Errorf("fencelock: a resource of a multi-resource lock holds no newline")
		}
	}
	if len(strings.Join(rs, "\n")) > ResourceMax {
		return fmt.Errorf("fencelock: resources must be %d bytes in all at most", ResourceMax)
	}
	return nil
}

// quote percent-encodes a path segment: every byte but the unreserved ones.
func quote(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// lockPath is a lock's own URL (release); a leader's (kind "leader") is
// its election's, where it is resigned.
func lockPath(resource, id, kind string) string {
	if kind == "leader" {
		return "/v1/elections/" + quote(resource) + "/" + id
	}
	q := ""
	if kind != "plain" {
		q = "?kind=" + kind
	}
	return "/v1/locks/" + quote(resource) + "/" + id + q
}

func extendPath(resource, id, kind string) string {
	if kind == "leader" {
		return "/v1/elections/" + quote(resource) + "/" + id + "/extend"
	}
	q := ""
	if kind != "plain" {
		q = "?kind=" + kind
	}
	return "/v1/locks/" + quote(resource) + "/" + id + "/extend" + q
}

// ---- elections ----

func checkValue(v string) error {
	if len(v) > ValueMax || strings.IndexByte(v, 0) >= 0 {
		return fmt.Errorf("fencelock: a value must be at most %d bytes without NUL, not %d bytes", ValueMax, len(v))
	}
	return nil
}

func electionPath(name string) string { return "/v1/elections/" + quote(name) }

func proclaimPath(name, id string) string {
	return "/v1/elections/" + quote(name) + "/" + id + "/proclaim"
}

// quoteValue percent-encodes a query value: every byte but the unreserved
// ones and those a query may carry as they are.
func quoteValue(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~!$'()*,;:@/?", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// leaderPath is a reading (no after), or the next reading that differs
// from afterEpoch (0: no leader) and afterValue (if sendValue; fencelockd
// decodes it before comparing), waiting up to waitMs.
func leaderPath(name string, after bool, afterEpoch uint64, afterValue string, sendValue bool, waitMs int64) string {
	p := electionPath(name)
	if !after {
		return p
	}
	p += fmt.Sprintf("?after=%d", afterEpoch)
	if sendValue {
		p += "&value=" + quoteValue(afterValue)
	}
	if waitMs > 0 {
		p += fmt.Sprintf("&wait_ms=%d", waitMs)
	}
	return p
}

func statusPath(resource, kind string, permits int) string {
	switch kind {
	case "semaphore":
		return fmt.Sprintf("/v1/locks/%s?kind=semaphore&permits=%d", quote(resource), permits)
	case "rw", "read", "write":
		return "/v1/locks/" + quote(resource) + "?kind=rw"
	case "reentrant":
		return "/v1/locks/" + quote(resource) + "?kind=reentrant"
	}
	return "/v1/locks/" + quote(resource)
}

// validity is the monotonic validity of one lock. The rule, the same in
// every fencelock client: the client reads the monotonic clock just before
// it sends an acquisition; the lock is valid until that instant plus the
// server's validity_ms (counted from the request), and only a successful
// extension moves it, to its own send time plus its validity_ms. Go's
// time.Time carries the monotonic reading, so Before/Sub compare on it: a
// process stopped past its validity finds the lock invalid on waking,
// whether its keep-alive ran or not.
type validity struct {
	acquired time.Time
	until    time.Time
}

func newValidity(sent time.Time, validityMs int64) validity {
	return validity{acquired: sent, until: sent.Add(time.Duration(validityMs) * time.Millisecond)}
}

// extended: an extension sent at sent answered validityMs; never moved back.
func (v *validity) extended(sent time.Time, validityMs int64) {
	u := sent.Add(time.Duration(validityMs) * time.Millisecond)
	if u.After(v.until) {
		v.until = u
	}
}

func (v *validity) valid(now time.Time) bool { return now.Before(v.until) }

func (v *validity) remaining(now time.Time) time.Duration {
	if d := v.until.Sub(now); d > 0 {
		return d
	}
	return 0
}

// needsConfirm: whether a grant must be confirmed by an extension before
// it is used. fencelockd counts a grant's validity_ms from the start of the
// attempt that won it, which after a wait is later than the request, and
// the client cannot know when. Counting from the request's send is safe but
// leaves little after a wait; counting from the answer's arrival is not
// safe. So a grant that took more than a tenth of its validity to arrive is
// extended at once, its validity counted from that extension's send. A
// grant without a wait costs nothing more.
func needsConfirm(sent, received time.Time, validityMs int64) bool {
	return received.Sub(sent) > time.Duration(validityMs)*time.Millisecond/10
}

// extendInterval: the keep-alive extends every third of the TTL.
func extendInterval(ttl time.Duration) time.Duration { return ttl / 3 }

// retryDelay after an extension that failed in a way that may pass: a tenth
// of the TTL (at least 20 ms), growing with each failure to a third.
func retryDelay(ttl time.Duration, attempt int) time.Duration {
	base := ttl / 10
	if base < 20*time.Millisecond {
		base = 20 * time.Millisecond
	}
	if attempt > 4 {
		attempt = 4
	}
	d := base << attempt
	limit := ttl / 3
	if limit < base {
		limit = base
	}
	if d > limit {
		d = limit
	}
	return d
}

// acquireBackoff between acquisitions retried while the wait lasts: 50 ms doubling to 1 s.
func acquireBackoff(attempt int) time.Duration {
	if attempt > 5 {
		attempt = 5
	}
	d := 50 * time.Millisecond << attempt
	if d > time.Second {
		d = time.Second
	}
	return d
}

// retryWaitMs is the wait_ms of a retried acquisition: what is left, rounded
// down to a whole second (100 ms below one). fencelockd keeps one lockcore
// client per distinct (ttl_ms, wait_ms, wait) and answers busy past
// --max-clients: a client must not send a new wait_ms with every try.
func retryWaitMs(left time.Duration) int64 {
	ms := left.Milliseconds()
	if ms < 0 {
		return 0
	}
	if ms >= 1000 {
		return ms - ms%1000
	}
	return ms - ms%100
}

// Codes an acquisition retries while its wait lasts (nothing was granted),
// and those after which the keep-alive gives a lock up at once.
var (
	acquireRetryCodes   = map[string]bool{"shutting_down": true, "busy": true, "no_quorum": true, "unreachable": true}
	keepaliveFatalCodes = map[string]bool{"lost": true, "forbidden": true, "unauthorized": true}
)

func toUint(v any) (uint64, bool) {
	switch n := v.(type) {
	case json.Number:
		u, err := n.Int64()
		if err != nil || u < 0 {
			return 0, false
		}
		return uint64(u), true
	case float64:
		if n < 0 || n > math.MaxInt64 || n != math.Trunc(n) {
			return 0, false
		}
		return uint64(n), true
	case int:
		return uint64(n), n >= 0
	}
	return 0, false
}

func toInt(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	case float64:
		return int64(n), n == math.Trunc(n)
	case int:
		return int64(n), true
	}
	return 0, false
}

// statusHeldBy: whether a status names one of ids as holder: by holder_ref,
// else by the holder id of servers from before holder_ref.
func statusHeldBy(status map[string]any, ids []string) bool {
	entries := []map[string]any{status}
	if ps, ok := status["permit"].([]any); ok {
		entries = nil
		for _, p := range ps {
			if m, ok := p.(map[string]any); ok {
				entries = append(entries, m)
			}
		}
	}
	for _, e := range entries {
		ref, _ := e["holder_ref"].(string)
		holder, _ := e["holder"].(string)
		for _, id := range ids {
			if ref != "" && ref == mustRef(id) || holder != "" && holder == id {
				return true
			}
		}
	}
	return false
}
