package fencelock

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Lock is a held lock. Release it when done (defer lock.Release()).
//
// Its Context is canceled the moment the lock is lost (Err then says why)
// or released. Valid and Check read the monotonic clock: a lock is never
// reported valid past the validity the server granted, whether or not the
// keep-alive ran. Safe for concurrent use.
type Lock struct {
	Resource  string   // the resource held (a permit's own name for a semaphore)
	Resources []string // a multi-resource lock's names (else [Resource])
	Kind      string   // as the server named it: plain, permit, multi, reentrant, read, write
	ID        string   // the lock id
	Ref       string   // the non-secret reference of ID a status reports as holder_ref
	OwnerID   string   // a reentrant lock's owner (what a status names), else ""
	Token     uint64   // the fencing token: send it with every write the lock protects
	Semaphore string   // the semaphore's name, for a permit
	Grant     map[string]any

	c       *Client
	ctx     context.Context
	cancel  context.CancelFunc
	onLost  func(*Lock, error)
	stop    chan struct{}
	mu      sync.Mutex
	ttl     time.Duration
	v       validity
	lost    error
	done    bool
	extends int
}

// lockCtx carries the acquisition's values, but not its cancellation or
// deadline: a deadline meant for the wait must not end the work.
type lockCtx struct {
	context.Context
	values context.Context
}

func (c lockCtx) Value(k any) any { return c.values.Value(k) }

func newLock(c *Client, g map[string]any, sent time.Time, o LockOptions, parent context.Context, reenter *Lock,
	what string) (*Lock, error) {
	res, _ := g["resource"].(string)
	kind, _ := g["kind"].(string)
	id, _ := g["lock_id"].(string)
	token, okT := toUint(g["token"])
	vms, okV := toInt(g["validity_ms"])
	if res == "" || kind == "" || checkLockID(id) != nil || !okT || !okV {
		return nil, &Error{Status: 200, Code: "protocol", Kind: ErrProtocol, Body: g,
			Message: what + ": the grant lacks a field the API documents"}
	}
	l := &Lock{Resource: res, Kind: kind, ID: id, Ref: mustRef(id), Token: token, Grant: g, c: c, ttl: o.TTL,
		v: newValidity(sent, vms), onLost: o.OnLost, stop: make(chan struct{})}
	if rs, ok := g["resources"].([]any); ok {
		for _, r := range rs {
			if s, ok := r.(string); ok {
				l.Resources = append(l.Resources, s)
			}
		}
	} else {
		l.Resources = []string{res}
	}
	l.Semaphore, _ = g["semaphore"].(string)
	if kind == "reentrant" {
		l.OwnerID = OwnerID(id)
		if reenter != nil && reenter.OwnerID != "" {
			l.OwnerID = reenter.OwnerID
		}
	}
	inner, cancel := context.WithCancel(context.Background())
	l.ctx, l.cancel = lockCtx{Context: inner, values: parent}, cancel
	return l, nil
}

func (l *Lock) ids() []string {
	if l.OwnerID != "" {
		return []string{l.ID, l.OwnerID}
	}
	return []string{l.ID}
}

// Context is canceled the moment the lock is lost or released; do the
// lock's work under it. It carries the values of the acquisition's context.
func (l *Lock) Context() context.Context { return l.ctx }

// Err is nil while the lock is held; after a loss an *Error of kind ErrLost
// (Code "lost", "expired", ...), after Release one with Code "released".
// It reads the monotonic clock, as Check.
func (l *Lock) Err() error { return l.Check() }

// Check returns an *Error of kind ErrLost unless the lock is still
// certainly held: not released, not reported lost, within its monotonic
// validity. It makes no request: call it before each step of the work.
func (l *Lock) Check() error {
	l.mu.Lock()
	err := l.lost
	if err == nil && l.done {
		l.mu.Unlock()
		return clientError(ErrLost, "released", fmt.Sprintf("the lock of %q was released", l.Resource), nil)
	}
	if err == nil && !l.v.valid(time.Now()) {
		l.mu.Unlock()
		return l.markLost(clientError(ErrLost, "expired",
			fmt.Sprintf("the lock of %q ran past its validity without an extension", l.Resource), nil))
	}
	l.mu.Unlock()
	return err
}

// Valid says whether the lock is still certainly held (see Check).
func (l *Lock) Valid() bool { return l.Check() == nil }

// Remaining is how long the lock is still certainly held (0 once not).
func (l *Lock) Remaining() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != nil || l.done {
		return 0
	}
	return l.v.remaining(time.Now())
}

// Acquired is when the acquisition was sent; ValidUntil the end of the
// validity (both with Go's monotonic reading).
func (l *Lock) Acquired() time.Time { return l.v.acquired }

// ValidUntil is the end of the lock's validity.
func (l *Lock) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.v.until
}

// Extensions is the number of extensions that succeeded.
func (l *Lock) Extensions() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.extends
}

// markLost records the first loss, cancels the context, calls OnLost.
func (l *Lock) markLost(err error) error {
	l.mu.Lock()
	if l.lost != nil || l.done {
		first := l.lost
		l.mu.Unlock()
		if first != nil {
			return first
		}
		return err
	}
	l.lost = err
	l.mu.Unlock()
	l.cancel()
	if l.onLost != nil {
		func() {
			defer func() { _ = recover() }() // a user's callback must not kill the keep-alive
			l.onLost(l, err)
		}()
	}
	return err
}

// Extend extends the lock now to its TTL from now (the keep-alive does it
// itself). An *Error of kind ErrLost if it is gone.
func (l *Lock) Extend(ctx context.Context) error {
	if err := l.Check(); err != nil {
		return err
	}
	_, err := l.extendBy(ctx, extendPath(l.Resource, l.ID, l.Kind), map[string]any{"ttl_ms": l.ttl.Milliseconds()},
		fmt.Sprintf("extend %q", l.Resource))
	return err
}

// extendBy is an extension, or a leader's proclamation (which extends too):
// the validity is pushed out from its send.
func (l *Lock) extendBy(ctx context.Context, path string, body map[string]any, what string) (map[string]any, error) {
	if err := l.Check(); err != nil {
		return nil, err
	}
	sent := time.Now()
	// No answer is worth waiting for past the validity: it could not save the lock.
	timeout := l.Remaining()
	if timeout > l.c.t.timeout {
		timeout = l.c.t.timeout
	}
	if timeout < time.Millisecond {
		timeout = time.Millisecond
	}
	obj, err := l.c.t.call(ctx, "POST", path, body, what, timeout)
	if err != nil {
		if fe, ok := err.(*Error); ok && keepaliveFatalCodes[fe.Code] {
			code := fe.Code
			return nil, l.markLost(&Error{Status: fe.Status, Code: code, Kind: ErrLost, Body: fe.Body,
				Message: fmt.Sprintf("the lock of %q is lost: %s", l.Resource, fe.Message), cause: fe})
		}
		return nil, err
	}
	vms, ok := toInt(obj["validity_ms"])
	if !ok {
		return nil, &Error{Status: 200, Code: "protocol", Kind: ErrProtocol, Body: obj, Message: what + ": no validity_ms"}
	}
	l.mu.Lock()
	// An answer after the validity ran out saves nothing: someone may have held it between.
	if l.lost == nil && l.v.valid(time.Now()) {
		l.v.extended(sent, vms)
		l.extends++
	}
	l.mu.Unlock()
	return obj, l.Check()
}

func (l *Lock) grantValidityMs() int64 { n, _ := toInt(l.Grant["validity_ms"]); return n }

// confirm: after a grant that waited, extend at once (see needsConfirm).
func (l *Lock) confirm(ctx context.Context) error {
	sent := time.Now()
	obj, err := l.c.t.call(ctx, "POST", extendPath(l.Resource, l.ID, l.Kind), map[string]any{"ttl_ms": l.ttl.Milliseconds()},
		fmt.Sprintf("extend %q", l.Resource), 0)
	if err != nil {
		_ = l.Release()
		if fe, ok := err.(*Error); ok && keepaliveFatalCodes[fe.Code] {
			return &Error{Status: fe.Status, Code: fe.Code, Kind: ErrLost, Body: fe.Body, cause: fe,
				Message: fmt.Sprintf("the lock of %q was lost before its grant arrived: %s", l.Resource, fe.Message)}
		}
		return err
	}
	vms, ok := toInt(obj["validity_ms"])
	if !ok {
		return &Error{Status: 200, Code: "protocol", Kind: ErrProtocol, Body: obj, Message: "extend: no validity_ms"}
	}
	l.mu.Lock()
	acquired := l.v.acquired
	l.v = newValidity(sent, vms)
	l.v.acquired = acquired
	l.extends++
	l.mu.Unlock()
	return nil
}

func (l *Lock) keepalive() {
	failures := 0
	due := time.Now().Add(extendInterval(l.ttl))
	for {
		// Wake for the next extension or the end of the validity, whichever first.
		wake := due
		if until := l.ValidUntil(); until.Before(wake) {
			wake = until
		}
		t := time.NewTimer(time.Until(wake))
		select {
		case <-l.stop:
			t.Stop()
			return
		case <-t.C:
		}
		if l.Check() != nil {
			return // lost (Check marked it and canceled the context) or released
		}
		if time.Now().Before(due) {
			continue
		}
		err := l.Extend(context.Background())
		if err == nil {
			failures = 0
			due = time.Now().Add(extendInterval(l.ttl))
			continue
		}
		if fe, ok := err.(*Error); ok && (fe.Kind == ErrLost || keepaliveFatalCodes[fe.Code]) {
			return
		}
		// It may pass (no quorum, a restart): again soon, while still valid.
		due = time.Now().Add(retryDelay(l.ttl, failures))
		failures++
	}
}

// Release releases the lock (once; later calls return nil) with the
// client's timeout, stops the keep-alive and cancels the context. A lost
// lock is released too, in case a majority still holds it.
func (l *Lock) Release() error { return l.ReleaseContext(context.Background()) }

// ReleaseContext is Release under ctx.
func (l *Lock) ReleaseContext(ctx context.Context) error {
	l.mu.Lock()
	if l.done {
		l.mu.Unlock()
		return nil
	}
	l.done = true
	close(l.stop)
	l.mu.Unlock()
	l.cancel()
	_, err := l.c.t.call(ctx, "DELETE", lockPath(l.Resource, l.ID, l.Kind), nil, fmt.Sprintf("release %q", l.Resource), 0)
	return err
}

// Reenter takes one more hold of a reentrant lock: same owner and token.
// o nil keeps this hold's TTL.
func (l *Lock) Reenter(ctx context.Context, o *LockOptions) (*Lock, error) {
	if l.Kind != "reentrant" {
		return nil, fmt.Errorf("fencelock: only a reentrant lock is re-entered, not a %s one", l.Kind)
	}
	if err := l.Check(); err != nil {
		return nil, err
	}
	if o == nil {
		o = &LockOptions{TTL: l.ttl}
	}
	return l.c.acquire(ctx, "reentrant", l.Resource, nil, 0, l, o)
}

// Fenced checks the lock, then calls fn with the lock's context and token:
// hand the token to your own database's fenced write
// (docs/guarding-your-database.md), which must refuse it if a larger token
// was seen.
func (l *Lock) Fenced(fn func(ctx context.Context, token uint64) error) error {
	if fn == nil {
		return fmt.Errorf("fencelock: Fenced: nil function")
	}
	if err := l.Check(); err != nil {
		return err
	}
	return fn(l.ctx, l.Token)
}
