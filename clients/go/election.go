package fencelock

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// CampaignOptions of a campaign. The zero value (or nil) is the defaults.
type CampaignOptions struct {
	// TTL is the leader's lease (default 10 s, whole milliseconds); the
	// keep-alive extends it every third of it.
	TTL time.Duration
	// Wait is how long to wait in line (default 0: one attempt), at most
	// the server's --max-wait. Candidates are elected in the order they asked.
	Wait time.Duration
	// NoKeepalive: do not extend the leader's lease from this process.
	NoKeepalive bool
	// OnLost is called (from the keep-alive's goroutine) the moment the
	// leader is known deposed.
	OnLost func(l *Leader, err error)
}

// Leader is an elected leader: the lock of its election, whose token is
// its epoch. Resign it when done (defer leader.Resign()).
//
// It embeds the *Lock: Check, Valid, Remaining, Context (canceled the
// moment it is deposed), Fenced and Token work as for a lock, on the same
// monotonic validity and keep-alive; give Fence{Lock: leader.Lock} to
// storage-guard and its epoch is sent as the token. Release is Resign.
type Leader struct {
	*Lock
	Name  string // the election
	Epoch uint64 // the leader's fencing token (== Token); a later leader's is larger

	vmu   sync.Mutex
	value string
}

// Value is what the leader proclaimed last.
func (l *Leader) Value() string {
	l.vmu.Lock()
	defer l.vmu.Unlock()
	return l.value
}

// Proclaim sets a new value under the same epoch (observers are told); it
// extends the lease too. ErrLost (and the context canceled) once deposed.
func (l *Leader) Proclaim(ctx context.Context, value string) error {
	if err := checkValue(value); err != nil {
		return err
	}
	body := map[string]any{"value": value, "ttl_ms": l.ttl.Milliseconds()}
	if _, err := l.extendBy(ctx, proclaimPath(l.Name, l.ID), body, fmt.Sprintf("proclaim %q", l.Name)); err != nil {
		return err
	}
	l.vmu.Lock()
	l.value = value
	l.vmu.Unlock()
	return nil
}

// Resign resigns (once; later calls return nil) with the client's timeout,
// stops the keep-alive and cancels the context: the next candidate in line
// is elected at once.
func (l *Leader) Resign() error { return l.ReleaseContext(context.Background()) }

// ResignContext is Resign under ctx.
func (l *Leader) ResignContext(ctx context.Context) error { return l.ReleaseContext(ctx) }

// Reading asks who leads this election now.
func (l *Leader) Reading(ctx context.Context) (*Reading, error) { return l.c.Leader(ctx, l.Name) }

// Campaign campaigns to lead the election name, proclaiming value (at
// most 256 bytes: an address, say), waiting in line up to o.Wait. Errors:
// ErrNotElected (which matches ErrLocked too) once the wait ran out,
// ErrCanceled when ctx ends (the campaign leaves the line), or another
// *Error. ctx bounds only the campaign: the leader's own Context carries
// ctx's values, not its end.
func (c *Client) Campaign(ctx context.Context, name, value string, o *CampaignOptions) (*Leader, error) {
	if ctx == nil {
		return nil, fmt.Errorf("fencelock: nil context")
	}
	if err := checkResource(name, "name"); err != nil {
		return nil, err
	}
	if err := checkValue(value); err != nil {
		return nil, err
	}
	var co CampaignOptions
	if o != nil {
		co = *o
	}
	opt, err := (&LockOptions{TTL: co.TTL, Wait: co.Wait, NoKeepalive: co.NoKeepalive}).norm()
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("campaign %q", name)
	body := map[string]any{"value": value, "ttl_ms": opt.TTL.Milliseconds(), "wait_ms": opt.Wait.Milliseconds()}
	obj, sent, err := c.grant(ctx, electionPath(name), body, opt.Wait, what)
	if err != nil {
		return nil, err
	}
	epoch, okE := toUint(obj["epoch"])
	gname, _ := obj["name"].(string)
	if !okE || gname == "" {
		return nil, &Error{Status: 200, Code: "protocol", Kind: ErrProtocol, Body: obj,
			Message: what + ": the answer lacks a field the API documents"}
	}
	g := make(map[string]any, len(obj)+2)
	for k, v := range obj {
		g[k] = v
	}
	g["resource"], g["kind"], g["token"] = gname, "leader", obj["epoch"]
	lock, err := newLock(c, g, sent, opt, ctx, nil, what)
	if err != nil {
		return nil, err
	}
	lock.Grant = obj
	l := &Leader{Lock: lock, Name: gname, Epoch: epoch}
	l.value, _ = obj["value"].(string)
	if co.OnLost != nil {
		lock.onLost = func(_ *Lock, err error) { co.OnLost(l, err) }
	}
	if needsConfirm(sent, time.Now(), lock.grantValidityMs()) {
		if err := lock.confirm(ctx); err != nil {
			return nil, err
		}
	}
	if !opt.NoKeepalive {
		go lock.keepalive()
	}
	return l, nil
}

// Reading is who leads an election (GET /v1/elections/{name}). Epoch,
// Value, TTLLeft, LeaderClient and LeaderRef are zero when nobody leads
// (or the server does not say).
type Reading struct {
	Name         string
	Leader       bool          // whether someone leads
	Epoch        uint64        // the leader's epoch, its fencing token
	Value        string        // what the leader proclaimed last
	TTLLeft      time.Duration // the leader's lease left
	LeaderClient string        // the bearer-token client that campaigned ("" without an auth file)
	LeaderRef    string        // the leader's Ref
	Changed      bool          // whether it differs from the reading an observer gave (false: the wait ran out)
	Raw          map[string]any
	// Err is set on the last reading a Watch sends when an error that does
	// not pass ended it (the channel is then closed); nil otherwise.
	Err error
}

// LedBy says whether this reading names l (by its ref and epoch).
func (r *Reading) LedBy(l *Leader) bool {
	return r.Leader && l != nil && r.LeaderRef == l.Ref && r.Epoch == l.Epoch
}

func (r *Reading) same(o *Reading) bool {
	return r.Leader == o.Leader && (!r.Leader || r.Epoch == o.Epoch && r.Value == o.Value)
}

func readingOf(obj map[string]any) *Reading {
	r := &Reading{Raw: obj}
	r.Name, _ = obj["name"].(string)
	r.Leader, _ = obj["leader"].(bool)
	r.Changed, _ = obj["changed"].(bool)
	r.LeaderClient, _ = obj["leader_client"].(string)
	r.LeaderRef, _ = obj["leader_ref"].(string)
	if r.Leader {
		r.Epoch, _ = toUint(obj["epoch"])
		r.Value, _ = obj["value"].(string)
		ms, _ := toInt(obj["ttl_ms_left"])
		r.TTLLeft = time.Duration(ms) * time.Millisecond
	}
	return r
}

// Leader asks who leads name now (one request; anyone may ask).
// ErrNoQuorum when no majority agreed on a reading (as while it changes
// hands) within fencelockd's 2 s.
func (c *Client) Leader(ctx context.Context, name string) (*Reading, error) {
	if err := checkResource(name, "name"); err != nil {
		return nil, err
	}
	obj, err := c.t.call(ctx, "GET", electionPath(name), nil, fmt.Sprintf("leader %q", name), 0)
	if err != nil {
		return nil, err
	}
	return readingOf(obj), nil
}

// Observe waits up to wait (0: 30 s) for the next reading of name that
// differs from after (a new leader, a new value, or none; after nil: the
// first leader): a long poll, answered at the change. If the wait ran
// out, the reading now with Changed false. ctx cancels (ErrCanceled).
func (c *Client) Observe(ctx context.Context, name string, after *Reading, wait time.Duration) (*Reading, error) {
	if err := checkResource(name, "name"); err != nil {
		return nil, err
	}
	if wait < 0 {
		return nil, fmt.Errorf("fencelock: wait must not be negative, not %v", wait)
	}
	if wait == 0 {
		wait = 30 * time.Second
	}
	ref := after
	if ref == nil {
		ref = &Reading{}
	}
	what := fmt.Sprintf("observe %q", name)
	ms := wait.Milliseconds()
	path := leaderPath(name, true, ref.Epoch, ref.Value, ref.Leader, ms)
	obj, err := c.t.call(ctx, "GET", path, nil, what, c.t.timeout+wait)
	if err != nil {
		return nil, err
	}
	return readingOf(obj), nil
}

// WatchOptions of a Watch. The zero value (or nil) is the defaults.
type WatchOptions struct {
	// Wait is each long poll's wait (default 30 s), at most the server's --max-wait.
	Wait time.Duration
}

// Watch sends who leads name, then each change, on the channel it
// returns: the first reading the current one, each next one the next
// change (long polls, never a poll on a period). A failure that may pass
// (no quorum, a restart, no answer) is retried with a back-off of 50 ms to
// 1 s; another ends the watch with a last Reading whose Err says why. The
// channel is closed when ctx ends or after that last reading. An epoch
// never goes back: a reading of an older leader than one already sent is
// not sent.
func (c *Client) Watch(ctx context.Context, name string, o *WatchOptions) <-chan Reading {
	ch := make(chan Reading, 1)
	wait := 30 * time.Second
	if o != nil && o.Wait > 0 {
		wait = o.Wait
	}
	go func() {
		defer close(ch)
		send := func(r Reading) bool {
			select {
			case ch <- r:
				return true
			case <-ctx.Done():
				return false
			}
		}
		if err := checkResource(name, "name"); err != nil {
			send(Reading{Name: name, Err: err})
			return
		}
		var last *Reading
		var floor uint64
		failures := 0
		for ctx.Err() == nil {
			var r *Reading
			var err error
			if last == nil {
				r, err = c.Leader(ctx, name)
			} else {
				r, err = c.Observe(ctx, name, last, wait)
			}
			if err != nil {
				fe, ok := err.(*Error)
				if ctx.Err() != nil || ok && fe.Kind == ErrCanceled {
					return
				}
				if !ok || !(acquireRetryCodes[fe.Code] || fe.Code == "timeout") {
					send(Reading{Name: name, Err: err})
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(acquireBackoff(failures)):
				}
				failures++
				continue
			}
			failures = 0
			if last != nil && !r.Changed {
				continue
			}
			stale := r.Leader && r.Epoch < floor
			last = r
			if stale {
				continue // an older leader's keys, read late: wait for the next change from them
			}
			if r.Leader {
				floor = r.Epoch
			}
			if !send(*r) {
				return
			}
		}
	}()
	return ch
}

// Proclaim proclaims a new value for the leader of name known by its id
// (the epoch stays; the lease is extended to ttl). ErrLost once deposed.
func (c *Client) Proclaim(ctx context.Context, name, lockID, value string, ttl time.Duration) (map[string]any, error) {
	if err := checkResource(name, "name"); err != nil {
		return nil, err
	}
	if err := checkLockID(lockID); err != nil {
		return nil, err
	}
	if err := checkValue(value); err != nil {
		return nil, err
	}
	if ttl < time.Millisecond {
		return nil, fmt.Errorf("fencelock: ttl must be at least 1 ms")
	}
	return c.t.call(ctx, "POST", proclaimPath(name, lockID), map[string]any{"value": value, "ttl_ms": ttl.Milliseconds()},
		fmt.Sprintf("proclaim %q", name), 0)
}

// Resign resigns the leader of name known by its id: the next candidate
// in line is elected at once.
func (c *Client) Resign(ctx context.Context, name, lockID string) (map[string]any, error) {
	return c.Release(ctx, name, lockID, "leader")
}
