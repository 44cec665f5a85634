package fencelock

import (
	"context"
	"fmt"
	"time"
)

// Client is a client of one fencelockd. It is safe for concurrent use;
// share one per process and Close it when done.
type Client struct {
	t *transport
}

// New makes a client of the fencelockd at url (like "http://127.0.0.1:7600").
// opts may be nil for the defaults.
func New(url string, opts *Options) (*Client, error) {
	t, err := newTransport(url, opts)
	if err != nil {
		return nil, err
	}
	return &Client{t: t}, nil
}

// Close closes the idle connections. Locks still held run out by their TTL
// unless released.
func (c *Client) Close() { c.t.close() }

// Wait modes of LockOptions.WaitMode.
const (
	WaitNotify = "notify" // told by the release (the default)
	WaitFair   = "fair"   // granted in arrival order
	WaitPoll   = "poll"   // retried after a delay
)

// LockOptions of an acquisition. The zero value (or nil) is the defaults.
type LockOptions struct {
	// TTL is the lease (default 10 s, whole milliseconds); the keep-alive
	// extends it every third of it.
	TTL time.Duration
	// Wait is how long to wait while the lock is held (default 0: one try),
	// at most the server's --max-wait.
	Wait time.Duration
	// WaitMode: WaitNotify (default), WaitFair or WaitPoll.
	WaitMode string
	// NoKeepalive: do not extend the lock from this process.
	NoKeepalive bool
	// OnLost is called (from the keep-alive's goroutine) the moment the
	// lock is known lost.
	OnLost func(l *Lock, err error)
}

func (o *LockOptions) norm() (LockOptions, error) {
	var v LockOptions
	if o != nil {
		v = *o
	}
	if v.TTL == 0 {
		v.TTL = 10 * time.Second
	}
	if v.TTL < time.Millisecond {
		return v, fmt.Errorf("fencelock: TTL must be at least 1 ms, not %v", v.TTL)
	}
	if v.Wait < 0 {
		return v, fmt.Errorf("fencelock: Wait must not be negative, not %v", v.Wait)
	}
	if v.WaitMode == "" {
		v.WaitMode = WaitNotify
	}
	if v.WaitMode != WaitNotify && v.WaitMode != WaitFair && v.WaitMode != WaitPoll {
		return v, fmt.Errorf("fencelock: WaitMode must be notify, fair or poll, not %q", v.WaitMode)
	}
	return v, nil
}

// Lock takes a plain lock of resource, waiting up to o.Wait while it is
// held. Errors: ErrLocked once the wait ran out, ErrCanceled when ctx ends
// (the server withdraws the wait), or another *Error. ctx bounds only the
// acquisition: the lock's own Context carries ctx's values, not its end.
func (c *Client) Lock(ctx context.Context, resource string, o *LockOptions) (*Lock, error) {
	if err := checkResource(resource, "resource"); err != nil {
		return nil, err
	}
	return c.acquire(ctx, "plain", resource, nil, 0, nil, o)
}

// LockMany takes several resources at once, all or none, under one token.
func (c *Client) LockMany(ctx context.Context, resources []string, o *LockOptions) (*Lock, error) {
	if err := checkResources(resources); err != nil {
		return nil, err
	}
	return c.acquire(ctx, "multi", "", append([]string(nil), resources...), 0, nil, o)
}

// ReadLock takes a read lock: many readers, no writer. Its token is the
// largest token of the resource's writes, to check reads with (not new).
func (c *Client) ReadLock(ctx context.Context, resource string, o *LockOptions) (*Lock, error) {
	if err := checkResource(resource, "resource"); err != nil {
		return nil, err
	}
	return c.acquire(ctx, "read", resource, nil, 0, nil, o)
}

// WriteLock takes a write lock: one writer, no reader.
func (c *Client) WriteLock(ctx context.Context, resource string, o *LockOptions) (*Lock, error) {
	if err := checkResource(resource, "resource"); err != nil {
		return nil, err
	}
	return c.acquire(ctx, "write", resource, nil, 0, nil, o)
}

// Semaphore takes one of permits permits of resource (every client of it
// names the same number); the Lock's Resource is the permit held.
func (c *Client) Semaphore(ctx context.Context, resource string, permits int, o *LockOptions) (*Lock, error) {
	if err := checkResource(resource, "resource"); err != nil {
		return nil, err
	}
	if permits < 1 || permits > PermitsMax {
		return nil, fmt.Errorf("fencelock: permits must be 1..%d, not %d", PermitsMax, permits)
	}
	return c.acquire(ctx, "semaphore", resource, nil, permits, nil, o)
}

// Reentrant takes a first hold of a reentrant lock; Lock.Reenter takes more.
func (c *Client) Reentrant(ctx context.Context, resource string, o *LockOptions) (*Lock, error) {
	if err := checkResource(resource, "resource"); err != nil {
		return nil, err
	}
	return c.acquire(ctx, "reentrant", resource, nil, 0, nil, o)
}

func (c *Client) acquire(ctx context.Context, kind, resource string, resources []string, permits int,
	reenter *Lock, o *LockOptions) (*Lock, error) {
	if ctx == nil {
		return nil, fmt.Errorf("fencelock: nil context")
	}
	opt, err := o.norm()
	if err != nil {
		return nil, err
	}
	body := map[string]any{"ttl_ms": opt.TTL.Milliseconds(), "wait_ms": opt.Wait.Milliseconds(), "wait": opt.WaitMode}
	path := "/v1/locks/" + quote(resource)
	what := fmt.Sprintf("acquire %q", resource)
	if kind == "multi" {
		body["resources"] = resources
		path = "/v1/locks"
		what = fmt.Sprintf("acquire %q", resources)
	} else if kind != "plain" {
		body["kind"] = kind
	}
	if permits > 0 {
		body["permits"] = permits
	}
	if reenter != nil {
		body["lock_id"] = reenter.ID
	}
	obj, sent, err := c.grant(ctx, path, body, opt.Wait, what)
	if err != nil {
		return nil, err
	}
	l, err := newLock(c, obj, sent, opt, ctx, reenter, what)
	if err != nil {
		return nil, err
	}
	if needsConfirm(sent, time.Now(), l.grantValidityMs()) {
		if err := l.confirm(ctx); err != nil {
			return nil, err
		}
	}
	if !opt.NoKeepalive {
		go l.keepalive()
	}
	return l, nil
}

// grant POSTs an acquisition or a campaign, retrying what may pass (a
// restart, a node back) while its wait lasts; it returns the answer and
// when it was sent.
func (c *Client) grant(ctx context.Context, path string, body map[string]any, wait time.Duration,
	what string) (map[string]any, time.Time, error) {
	deadline := time.Now().Add(wait)
	for attempt := 0; ; attempt++ {
		left := wait.Milliseconds()
		if attempt > 0 {
			left = retryWaitMs(time.Until(deadline))
		}
		body["wait_ms"] = left
		sent := time.Now()
		status, obj, err := c.t.do(ctx, "POST", path, body, nil, c.t.timeout+time.Duration(left)*time.Millisecond, what)
		var fe *Error
		if err == nil && status == 200 {
			return obj, sent, nil
		}
		if err != nil {
			var ok bool
			if fe, ok = err.(*Error); !ok || fe.Kind == ErrCanceled {
				return nil, sent, err
			}
		} else {
			fe = FromAnswer(status, obj, what)
		}
		if !acquireRetryCodes[fe.Code] || !time.Now().Before(deadline) {
			return nil, sent, fe
		}
		pause := acquireBackoff(attempt)
		if d := time.Until(deadline); d < pause {
			pause = d
		}
		select {
		case <-ctx.Done():
			return nil, sent, clientError(ErrCanceled, "canceled", what+": canceled", ctx.Err())
		case <-time.After(pause):
		}
	}
}

var lockKinds = map[string]bool{"plain": true, "permit": true, "multi": true, "reentrant": true, "read": true, "write": true,
	"leader": true}

// Extend extends a lock by its id (kind as its grant named it; "" is
// plain; "leader" for an election's leader, resource its name). The answer
// carries no token. ErrLost if it is no longer held.
func (c *Client) Extend(ctx context.Context, resource, lockID string, ttl time.Duration, kind string) (map[string]any, error) {
	if err := checkResource(resource, "resource"); err != nil {
		return nil, err
	}
	if err := checkLockID(lockID); err != nil {
		return nil, err
	}
	if kind == "" {
		kind = "plain"
	}
	if !lockKinds[kind] {
		return nil, fmt.Errorf("fencelock: kind must be plain, permit, multi, reentrant, read, write or leader, not %q", kind)
	}
	if ttl < time.Millisecond {
		return nil, fmt.Errorf("fencelock: ttl must be at least 1 ms")
	}
	return c.t.call(ctx, "POST", extendPath(resource, lockID, kind), map[string]any{"ttl_ms": ttl.Milliseconds()},
		fmt.Sprintf("extend %q", resource), 0)
}

// Release releases a lock by its id; nodes_released below a majority
// means it had run out already.
func (c *Client) Release(ctx context.Context, resource, lockID, kind string) (map[string]any, error) {
	if err := checkResource(resource, "resource"); err != nil {
		return nil, err
	}
	if err := checkLockID(lockID); err != nil {
		return nil, err
	}
	if kind == "" {
		kind = "plain"
	}
	if !lockKinds[kind] {
		return nil, fmt.Errorf("fencelock: kind must be plain, permit, multi, reentrant, read, write or leader, not %q", kind)
	}
	return c.t.call(ctx, "DELETE", lockPath(resource, lockID, kind), nil, fmt.Sprintf("release %q", resource), 0)
}

// Status is a status answer (GET /v1/locks/{resource}) as the server sent
// it; the holder fields read defensively (absent: "").
type Status struct {
	Raw map[string]any
}

// Held says whether a majority holds the lock.
func (s *Status) Held() bool { b, _ := s.Raw["held"].(bool); return b }

// HolderClient is the holder's bearer-token client name, or "".
func (s *Status) HolderClient() string { v, _ := s.Raw["holder_client"].(string); return v }

// HolderRef is a non-secret form of the holder's lock id, or "".
func (s *Status) HolderRef() string { v, _ := s.Raw["holder_ref"].(string); return v }

// HeldBy says whether this status names l as the holder.
func (s *Status) HeldBy(l *Lock) bool { return statusHeldBy(s.Raw, l.ids()) }

// Status asks what the nodes say of a lock. kind: "" or "plain", "rw",
// "reentrant", or "semaphore" with permits.
func (c *Client) Status(ctx context.Context, resource, kind string, permits int) (*Status, error) {
	if err := checkResource(resource, "resource"); err != nil {
		return nil, err
	}
	if kind == "" {
		kind = "plain"
	}
	if kind != "plain" && kind != "rw" && kind != "reentrant" && kind != "semaphore" {
		return nil, fmt.Errorf("fencelock: kind must be plain, rw, reentrant or semaphore, not %q", kind)
	}
	if (kind == "semaphore") != (permits > 0) || permits < 0 || permits > PermitsMax {
		return nil, fmt.Errorf("fencelock: a semaphore's status needs permits 1..%d, and only a semaphore's", PermitsMax)
	}
	obj, err := c.t.call(ctx, "GET", statusPath(resource, kind, permits), nil, fmt.Sprintf("status %q", resource), 0)
	if err != nil {
		return nil, err
	}
	return &Status{Raw: obj}, nil
}

// Health is GET /healthz.
func (c *Client) Health(ctx context.Context) (map[string]any, error) {
	return c.t.call(ctx, "GET", "/healthz", nil, "health", 0)
}
