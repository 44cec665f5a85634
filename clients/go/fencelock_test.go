package fencelock

// The module's logic without I/O: errors, references, validity, arguments.
// The behaviour against real servers is the conformance suite's
// (tests/clients in the fencelock tree).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestEveryDocumentedCodeMapsToItsKind(t *testing.T) {
	for code, kind := range codes {
		e := FromAnswer(400, map[string]any{"error": code, "message": "m"}, "")
		if !errors.Is(e, kind) || e.Code != code {
			t.Errorf("%s: got %v", code, e)
		}
	}
	for status, want := range map[int]error{503: ErrBusy, 500: ErrServer, 418: ErrBadRequest, 401: ErrUnauthorized, 409: ErrFencelock} {
		if e := FromAnswer(status, nil, ""); !errors.Is(e, want) {
			t.Errorf("%d: got %v", status, e)
		}
	}
}

func TestRefusalHolderFields(t *testing.T) {
	e := FromAnswer(409, map[string]any{"error": "locked", "holder_ref": "ab"}, "x")
	if !errors.Is(e, ErrLocked) || e.HolderRef() != "ab" || e.HolderClient() != "" {
		t.Fatalf("%v %q %q", e, e.HolderRef(), e.HolderClient())
	}
}

func TestCanceledMatchesTheContextsError(t *testing.T) {
	e := clientError(ErrCanceled, "canceled", "x", context.Canceled)
	if !errors.Is(e, ErrCanceled) || !errors.Is(e, context.Canceled) {
		t.Fatal(e)
	}
}

func TestLockRef(t *testing.T) {
	id := "20cd09bbe0869ae3e1657f553d0798e70c000001"
	sum := sha256.Sum256([]byte(id[:34] + "000000"))
	if r, err := LockRef(id); err != nil || r != hex.EncodeToString(sum[:])[:16] {
		t.Fatal(r, err)
	}
	if _, err := LockRef("XYZ"); err == nil {
		t.Fatal("a bad id was taken")
	}
}

func TestValidity(t *testing.T) {
	t0 := time.Now()
	v := newValidity(t0, 500)
	if !v.valid(t0.Add(499*time.Millisecond)) || v.valid(t0.Add(500*time.Millisecond)) {
		t.Fatal("valid until send + validity")
	}
	v.extended(t0.Add(300*time.Millisecond), 480)
	v.extended(t0.Add(200*time.Millisecond), 100) // an older extension's late answer
	if got := v.until.Sub(t0); got != 780*time.Millisecond {
		t.Fatal(got)
	}
	if retryWaitMs(4567*time.Millisecond) != 4000 || retryWaitMs(456*time.Millisecond) != 400 {
		t.Fatal("retry wait")
	}
	if extendInterval(900*time.Millisecond) != 300*time.Millisecond || retryDelay(time.Second, 10) > time.Second/3 {
		t.Fatal("keep-alive schedule")
	}
}

func fakeLock(t *testing.T, validityMs int64, sent time.Time, kind string) *Lock {
	c, _ := New("http://127.0.0.1:9", nil)
	g := map[string]any{"resource": "r", "kind": kind, "lock_id": "20cd09bbe0869ae3e1657f553d0798e70c000001",
		"token": 17.0, "validity_ms": float64(validityMs)}
	var lost []error
	l, err := newLock(c, g, sent, LockOptions{TTL: time.Second, OnLost: func(_ *Lock, e error) { lost = append(lost, e) }},
		context.Background(), nil, "t")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestALockPastItsValidityIsLostWithoutARequest(t *testing.T) {
	l := fakeLock(t, 5, time.Now().Add(-10*time.Millisecond), "plain")
	err := l.Check()
	var fe *Error
	if !errors.Is(err, ErrLost) || !errors.As(err, &fe) || fe.Code != "expired" {
		t.Fatal(err)
	}
	select {
	case <-l.Context().Done():
	default:
		t.Fatal("the context was not canceled")
	}
	if l.Valid() || l.Remaining() != 0 {
		t.Fatal("still valid")
	}
	if err := l.Fenced(func(context.Context, uint64) error { t.Fatal("called"); return nil }); !errors.Is(err, ErrLost) {
		t.Fatal(err)
	}
}

func TestStatusHeldBy(t *testing.T) {
	l := fakeLock(t, 1000, time.Now(), "plain")
	if !(&Status{Raw: map[string]any{"holder_ref": l.Ref}}).HeldBy(l) ||
		!(&Status{Raw: map[string]any{"holder": l.ID}}).HeldBy(l) ||
		(&Status{Raw: map[string]any{"holder_ref": strings.Repeat("0", 16)}}).HeldBy(l) {
		t.Fatal("heldBy")
	}
	re := fakeLock(t, 1000, time.Now(), "reentrant")
	if re.OwnerID != re.ID[:34]+"000000" || !(&Status{Raw: map[string]any{"holder_ref": mustRef(re.OwnerID)}}).HeldBy(re) {
		t.Fatal("owner")
	}
}

func TestTheLockContextKeepsValuesNotTheDeadline(t *testing.T) {
	type key struct{}
	parent, cancel := context.WithTimeout(context.WithValue(context.Background(), key{}, "v"), time.Millisecond)
	defer cancel()
	c, _ := New("http://127.0.0.1:9", nil)
	l, err := newLock(c, map[string]any{"resource": "r", "kind": "plain", "lock_id": strings.Repeat("a", 40),
		"token": 1.0, "validity_ms": 1000.0}, time.Now(), LockOptions{TTL: time.Second}, parent, nil, "t")
	if err != nil {
		t.Fatal(err)
	}
	<-parent.Done()
	if l.Context().Err() != nil || l.Context().Value(key{}) != "v" {
		t.Fatal("the lock's context ended with the acquisition's, or lost its values")
	}
}

func TestBadArgumentsAreRefusedBeforeAnyRequest(t *testing.T) {
	c, _ := New("http://127.0.0.1:9", nil)
	ctx := context.Background()
	cases := []func() error{
		func() error { _, err := c.Lock(ctx, "", nil); return err },
		func() error { _, err := c.Lock(ctx, strings.Repeat("x", 513), nil); return err },
		func() error { _, err := c.Lock(ctx, "r", &LockOptions{TTL: time.Microsecond}); return err },
		func() error { _, err := c.Lock(ctx, "r", &LockOptions{Wait: -1}); return err },
		func() error { _, err := c.Lock(ctx, "r", &LockOptions{WaitMode: "later"}); return err },
		func() error { _, err := c.LockMany(ctx, nil, nil); return err },
		func() error { _, err := c.LockMany(ctx, []string{"a\nb"}, nil); return err },
		func() error { _, err := c.Semaphore(ctx, "r", 0, nil); return err },
		func() error { _, err := c.Release(ctx, "r", "abc", ""); return err },
		func() error { _, err := c.Status(ctx, "r", "semaphore", 0); return err },
		func() error { _, err := c.Lock(nil, "r", nil); return err }, //nolint:staticcheck // a nil context is refused
	}
	for i, f := range cases {
		err := f()
		var fe *Error
		if err == nil || errors.As(err, &fe) {
			t.Errorf("case %d: want an argument error, got %v", i, err)
		}
	}
	for _, u := range []string{"127.0.0.1:7600", "ftp://x", "http://h/path"} {
		if _, err := New(u, nil); err == nil {
			t.Errorf("%s was taken", u)
		}
	}
	if _, err := New("http://h", &Options{CAFile: "/ca.pem"}); err == nil {
		t.Error("a CA file for http was taken")
	}
	sg, _ := NewStorageGuard("http://127.0.0.1:9", nil)
	for i, f := range []func() error{
		func() error { _, err := sg.Put(ctx, "k", 1, Fence{}); return err },
		func() error { _, err := sg.Put(ctx, "", 1, Fence{Token: 5}); return err },
		func() error { _, err := sg.Put(ctx, "k", 1, Fence{Token: 1 << 53}); return err },
		func() error { _, err := sg.Get(ctx, "k", Fence{}, true); return err },
		func() error { _, err := sg.Batch(ctx, nil, Fence{Token: 5}); return err },
		func() error { _, err := sg.Put(ctx, "k", 1, Fence{Token: 5, IfVersion: 2, IfAbsent: true}); return err },
	} {
		var fe *Error
		if err := f(); err == nil || errors.As(err, &fe) {
			t.Errorf("storage case %d: want an argument error, got %v", i, err)
		}
	}
}

func TestNotElectedIsALocked(t *testing.T) {
	e := FromAnswer(409, map[string]any{"error": "not_elected", "message": "m"}, "")
	if !errors.Is(e, ErrNotElected) || !errors.Is(e, ErrLocked) || errors.Is(e, ErrLost) {
		t.Fatal(e)
	}
	if l := FromAnswer(409, map[string]any{"error": "locked"}, ""); errors.Is(l, ErrNotElected) {
		t.Fatal("a locked is not a not_elected")
	}
}

func TestObserverQueries(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{leaderPath("s", false, 0, "", false, 0), "/v1/elections/s"},
		{leaderPath("s", true, 0, "", false, 500), "/v1/elections/s?after=0&wait_ms=500"},
		{leaderPath("s", true, 7, "10.0.0.7:8080", true, 500), "/v1/elections/s?after=7&value=10.0.0.7:8080&wait_ms=500"},
		{leaderPath("s", true, 7, "a b&c", true, 0), "/v1/elections/s?after=7&value=a%20b%26c"},
		{leaderPath("s", true, 7, "é+%", true, 0), "/v1/elections/s?after=7&value=%C3%A9%2B%25"},
		{lockPath("a/b", strings.Repeat("a", 40), "leader"), "/v1/elections/a%2Fb/" + strings.Repeat("a", 40)},
		{extendPath("s", strings.Repeat("a", 40), "leader"), "/v1/elections/s/" + strings.Repeat("a", 40) + "/extend"},
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
}

func TestReadingsAreReadDefensively(t *testing.T) {
	r := readingOf(map[string]any{"name": "s", "leader": false, "epoch": json.Number("9")})
	if r.Leader || r.Epoch != 0 || r.Value != "" || r.LeaderRef != "" {
		t.Fatal(r)
	}
	r = readingOf(map[string]any{"leader": true, "epoch": json.Number("9"), "value": "v", "leader_ref": "ab",
		"ttl_ms_left": json.Number("50")})
	if !r.Leader || r.Epoch != 9 || r.Value != "v" || r.TTLLeft != 50*time.Millisecond {
		t.Fatal(r)
	}
	if !r.LedBy(&Leader{Lock: &Lock{Ref: "ab"}, Epoch: 9}) || r.LedBy(&Leader{Lock: &Lock{Ref: "ab"}, Epoch: 8}) {
		t.Fatal("LedBy")
	}
}

func TestBadElectionArgumentsAreRefusedBeforeAnyRequest(t *testing.T) {
	c, _ := New("http://127.0.0.1:9", nil)
	ctx := context.Background()
	for i, f := range []func() error{
		func() error { _, err := c.Campaign(ctx, "", "v", nil); return err },
		func() error { _, err := c.Campaign(ctx, "s", strings.Repeat("x", 257), nil); return err },
		func() error { _, err := c.Campaign(ctx, "s", "a\x00b", nil); return err },
		func() error { _, err := c.Campaign(ctx, "s", "v", &CampaignOptions{TTL: time.Microsecond}); return err },
		func() error { _, err := c.Campaign(ctx, "s", "v", &CampaignOptions{Wait: -1}); return err },
		func() error { _, err := c.Observe(ctx, "s", nil, -1); return err },
		func() error { _, err := c.Proclaim(ctx, "s", "xyz", "v", time.Second); return err },
		func() error { _, err := c.Resign(ctx, "s", "xyz"); return err },
		func() error { r := <-c.Watch(ctx, "", nil); return r.Err },
	} {
		var fe *Error
		if err := f(); err == nil || errors.As(err, &fe) {
			t.Errorf("case %d: want an argument error, got %v", i, err)
		}
	}
}
