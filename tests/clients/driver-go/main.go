// The Go driver of the client conformance suite (tests/clients/README.md):
// one JSON command a line on stdin, one JSON answer a line on stdout,
// through the fencelock module (a replace of clients/go, as a user's
// go.mod would have it).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"fencelock"
)

const lang = "go"

var (
	clients = map[string]*fencelock.Client{}
	stores  = map[string]*fencelock.StorageGuard{}
	locks   = map[string]*fencelock.Lock{}
	leaders = map[string]*fencelock.Leader{}
	outMu   sync.Mutex
	out     = bufio.NewWriter(os.Stdout)
)

func emit(v any) {
	outMu.Lock()
	defer outMu.Unlock()
	b, _ := json.Marshal(v)
	out.Write(b)
	out.WriteByte('\n')
	out.Flush()
}

// monoMs is CLOCK_MONOTONIC in ms, as the other drivers report it.
func monoMs() float64 {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&ts)), 0)
	return float64(ts.Sec)*1000 + float64(ts.Nsec)/1e6
}

// onMono places a time.Time (with its monotonic reading) on CLOCK_MONOTONIC.
func onMono(t time.Time) float64 {
	return monoMs() - float64(time.Since(t).Nanoseconds())/1e6
}

var kinds = []struct {
	err  error
	name string
}{
	{fencelock.ErrBadRequest, "BadRequest"}, {fencelock.ErrUnauthorized, "Unauthorized"},
	{fencelock.ErrForbidden, "Forbidden"}, {fencelock.ErrNotFound, "NotFound"},
	{fencelock.ErrNotElected, "NotElected"}, {fencelock.ErrLocked, "Locked"}, // NotElected matches ErrLocked too: first
	{fencelock.ErrLost, "Lost"}, {fencelock.ErrStaleToken, "StaleToken"},
	{fencelock.ErrVersionMismatch, "VersionMismatch"}, {fencelock.ErrMissingToken, "MissingToken"},
	{fencelock.ErrNode, "NodeError"}, {fencelock.ErrNoQuorum, "NoQuorum"}, {fencelock.ErrTooSlow, "TooSlow"},
	{fencelock.ErrNoToken, "NoToken"}, {fencelock.ErrShuttingDown, "ShuttingDown"}, {fencelock.ErrBusy, "Busy"},
	{fencelock.ErrServer, "ServerError"}, {fencelock.ErrUnreachable, "Unreachable"},
	{fencelock.ErrTimeout, "Timeout"}, {fencelock.ErrCanceled, "Canceled"}, {fencelock.ErrProtocol, "ProtocolError"},
	{fencelock.ErrFencelock, "FencelockError"},
}

func canonical(err error) string {
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	return ""
}

func errorJSON(err error) map[string]any {
	var fe *fencelock.Error
	if errors.As(err, &fe) {
		body := fe.Body
		lt := any(nil)
		if fe.LastToken() != 0 {
			lt = fe.LastToken()
		}
		hr, hc := any(nil), any(nil)
		if fe.HolderRef() != "" {
			hr = fe.HolderRef()
		}
		if fe.HolderClient() != "" {
			hc = fe.HolderClient()
		}
		_ = body
		return map[string]any{"type": canonical(err), "code": fe.Code, "status": fe.Status, "message": err.Error(),
			"holder_ref": hr, "holder_client": hc, "last_token": lt, "is_locked": errors.Is(err, fencelock.ErrLocked)}
	}
	return map[string]any{"type": "InvalidArgument", "code": "", "status": 0, "message": err.Error()}
}

type args map[string]any

func (a args) str(k string) string  { s, _ := a[k].(string); return s }
func (a args) has(k string) bool    { _, ok := a[k]; return ok }
func (a args) num(k string) float64 { f, _ := a[k].(float64); return f }
func (a args) ms(k string) time.Duration {
	return time.Duration(a.num(k) * float64(time.Millisecond))
}
func (a args) client() string {
	if c := a.str("client"); c != "" {
		return c
	}
	return "default"
}
func (a args) strs(k string) []string {
	var out []string
	if l, ok := a[k].([]any); ok {
		for _, v := range l {
			s, _ := v.(string)
			out = append(out, s)
		}
	}
	return out
}

func lockOpts(a args) *fencelock.LockOptions {
	o := &fencelock.LockOptions{TTL: 10 * time.Second}
	if a.has("ttl_ms") {
		o.TTL = a.ms("ttl_ms")
		if o.TTL == 0 {
			o.TTL = time.Nanosecond // an invalid TTL, to be refused
		}
	}
	if a.has("wait_ms") {
		o.Wait = a.ms("wait_ms")
	}
	if a.has("wait") {
		o.WaitMode = a.str("wait")
	}
	if k, ok := a["keepalive"].(bool); ok && !k {
		o.NoKeepalive = true
	}
	return o
}

func cancelCtx(a args) context.Context {
	ctx := context.Background()
	if a.has("cancel_after_ms") {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		time.AfterFunc(a.ms("cancel_after_ms"), cancel)
	}
	return ctx
}

func campaign(a args, c *fencelock.Client, name string) (*fencelock.Leader, error) {
	o := &fencelock.CampaignOptions{TTL: 10 * time.Second}
	if a.has("ttl_ms") {
		o.TTL = a.ms("ttl_ms")
	}
	if a.has("wait_ms") {
		o.Wait = a.ms("wait_ms")
	}
	if k, ok := a["keepalive"].(bool); ok && !k {
		o.NoKeepalive = true
	}
	return c.Campaign(cancelCtx(a), name, a.str("value"), o)
}

func leaderJSON(h string, l *fencelock.Leader) map[string]any {
	r := lockJSON(h, l.Lock)
	r["name"], r["epoch"], r["value"] = l.Name, l.Epoch, l.Value()
	return r
}

func readingJSON(r *fencelock.Reading) map[string]any {
	j := map[string]any{"name": r.Name, "leader": r.Leader, "epoch": nil, "value": nil, "ttl_ms_left": nil,
		"leader_client": nil, "leader_ref": nil, "changed": r.Changed, "at_mono_ms": monoMs()}
	if r.Leader {
		j["epoch"], j["value"], j["ttl_ms_left"] = r.Epoch, r.Value, r.TTLLeft.Milliseconds()
	}
	if r.LeaderClient != "" {
		j["leader_client"] = r.LeaderClient
	}
	if r.LeaderRef != "" {
		j["leader_ref"] = r.LeaderRef
	}
	return j
}

// readingOf: a reading the harness hands back (after) as the client's own type.
func readingOf(v any) *fencelock.Reading {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	r := &fencelock.Reading{}
	r.Leader, _ = m["leader"].(bool)
	if e, ok := m["epoch"].(float64); ok {
		r.Epoch = uint64(e)
	}
	r.Value, _ = m["value"].(string)
	return r
}

func acquire(a args, c *fencelock.Client) (*fencelock.Lock, error) {
	ctx := cancelCtx(a)
	o := lockOpts(a)
	switch k := a.str("kind"); k {
	case "leader":
		l, err := campaign(a, c, a.str("resource"))
		if err != nil {
			return nil, err
		}
		return l.Lock, nil
	case "", "plain":
		return c.Lock(ctx, a.str("resource"), o)
	case "multi":
		return c.LockMany(ctx, a.strs("resources"), o)
	case "read":
		return c.ReadLock(ctx, a.str("resource"), o)
	case "write":
		return c.WriteLock(ctx, a.str("resource"), o)
	case "semaphore":
		return c.Semaphore(ctx, a.str("resource"), int(a.num("permits")), o)
	case "reentrant":
		return c.Reentrant(ctx, a.str("resource"), o)
	default:
		return nil, fmt.Errorf("unknown kind %q", k)
	}
}

func lockJSON(h string, l *fencelock.Lock) map[string]any {
	return map[string]any{"handle": h, "lock_id": l.ID, "ref": l.Ref, "token": l.Token, "resource": l.Resource,
		"resources": l.Resources, "kind": l.Kind, "acquired_mono_ms": onMono(l.Acquired()),
		"valid_until_mono_ms": onMono(l.ValidUntil())}
}

func fence(a args) fencelock.Fence {
	var f fencelock.Fence
	if a.has("handle") {
		f.Lock = locks[a.str("handle")]
	}
	if a.has("token") {
		f.Token = uint64(a.num("token"))
	}
	f.Resource = a.str("resource")
	if a.has("if_version") {
		if v := uint64(a.num("if_version")); v == 0 {
			f.IfAbsent = true
		} else {
			f.IfVersion = v
		}
	}
	if b, _ := a["if_exists"].(bool); b {
		f.IfExists = true
	}
	return f
}

func contend(a args) (any, error) {
	c := clients[a.client()]
	st := stores[a.client()]
	var mu sync.Mutex
	sections := []map[string]any{}
	errs := []map[string]any{}
	var wg sync.WaitGroup
	workers := int(a.num("workers"))
	if workers == 0 {
		workers = 1
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < int(a.num("iterations")); i++ {
				l, err := acquire(a, c)
				if err != nil {
					if !errors.Is(err, fencelock.ErrLocked) {
						mu.Lock()
						errs = append(errs, errorJSON(err))
						mu.Unlock()
					}
					continue
				}
				granted := monoMs()
				time.Sleep(a.ms("hold_ms"))
				if k := a.str("write_key"); k != "" && st != nil {
					if _, err := st.Put(context.Background(), k, fmt.Sprintf("%s-%d-%d", lang, w, i), fencelock.Fence{Lock: l}); err != nil {
						mu.Lock()
						errs = append(errs, errorJSON(err))
						mu.Unlock()
					}
				}
				end := monoMs()
				if u := onMono(l.ValidUntil()); u < end {
					end = u
				}
				valid := l.Valid()
				if err := l.Release(); err != nil {
					mu.Lock()
					errs = append(errs, errorJSON(err))
					mu.Unlock()
				}
				mu.Lock()
				sections = append(sections, map[string]any{"lang": lang, "worker": w, "granted": granted, "end": end,
					"token": l.Token, "acquired": onMono(l.Acquired()), "valid_at_end": valid})
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	return map[string]any{"sections": sections, "errors": errs}, nil
}

func run(id any, cmd string, a args) (any, error) {
	ctx := context.Background()
	switch cmd {
	case "hello":
		return map[string]any{"lang": lang, "version": fencelock.Version}, nil
	case "config":
		name := a.str("name")
		if name == "" {
			name = "default"
		}
		if c := clients[name]; c != nil {
			c.Close()
		}
		o := &fencelock.Options{Token: a.str("token"), CAFile: a.str("ca_file"), Timeout: a.ms("timeout_ms")}
		c, err := fencelock.New(a.str("url"), o)
		if err != nil {
			return nil, err
		}
		clients[name] = c
		if a.str("sg_url") != "" {
			s, err := fencelock.NewStorageGuard(a.str("sg_url"), &fencelock.Options{Token: a.str("sg_token"),
				CAFile: a.str("sg_ca_file"), Timeout: a.ms("timeout_ms")})
			if err != nil {
				return nil, err
			}
			stores[name] = s
		}
		return map[string]any{}, nil
	case "acquire":
		t0 := monoMs()
		l, err := acquire(a, clients[a.client()])
		if err != nil {
			return nil, err
		}
		locks[a.str("handle")] = l
		r := lockJSON(a.str("handle"), l)
		r["elapsed_ms"] = monoMs() - t0
		return r, nil
	case "campaign":
		t0 := monoMs()
		l, err := campaign(a, clients[a.client()], a.str("name"))
		if err != nil {
			return nil, err
		}
		locks[a.str("handle")], leaders[a.str("handle")] = l.Lock, l
		r := leaderJSON(a.str("handle"), l)
		r["elapsed_ms"], r["elected_mono_ms"] = monoMs()-t0, monoMs()
		return r, nil
	case "proclaim":
		l := leaders[a.str("handle")]
		if err := l.Proclaim(ctx, a.str("value")); err != nil {
			return nil, err
		}
		return map[string]any{"value": l.Value(), "epoch": l.Epoch, "valid_until_mono_ms": onMono(l.ValidUntil())}, nil
	case "resign":
		return map[string]any{}, leaders[a.str("handle")].Resign()
	case "leader":
		r, err := clients[a.client()].Leader(ctx, a.str("name"))
		if err != nil {
			return nil, err
		}
		return readingJSON(r), nil
	case "observe":
		wait := 30 * time.Second
		if a.has("wait_ms") {
			wait = a.ms("wait_ms")
		}
		r, err := clients[a.client()].Observe(ctx, a.str("name"), readingOf(a["after"]), wait)
		if err != nil {
			return nil, err
		}
		return readingJSON(r), nil
	case "watch":
		// Readings of client.Watch, each told as an event as it comes, until
		// count of them or timeout_ms.
		timeout := 5 * time.Second
		if a.has("timeout_ms") {
			timeout = a.ms("timeout_ms")
		}
		wctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		o := &fencelock.WatchOptions{}
		if a.has("wait_ms") {
			o.Wait = a.ms("wait_ms")
		}
		readings := []map[string]any{}
		for r := range clients[a.client()].Watch(wctx, a.str("name"), o) {
			if r.Err != nil {
				return nil, r.Err
			}
			readings = append(readings, readingJSON(&r))
			emit(map[string]any{"id": id, "event": "reading", "reading": readings[len(readings)-1]})
			if len(readings) >= int(a.num("count")) {
				break
			}
		}
		return map[string]any{"readings": readings, "timed_out": wctx.Err() != nil}, nil
	case "proclaim_id":
		ttl := 10 * time.Second
		if a.has("ttl_ms") {
			ttl = a.ms("ttl_ms")
		}
		return clients[a.client()].Proclaim(ctx, a.str("name"), a.str("lock_id"), a.str("value"), ttl)
	case "resign_id":
		return clients[a.client()].Resign(ctx, a.str("name"), a.str("lock_id"))
	case "reenter":
		var o *fencelock.LockOptions
		if a.has("ttl_ms") {
			o = lockOpts(a)
		}
		l, err := locks[a.str("handle")].Reenter(ctx, o)
		if err != nil {
			return nil, err
		}
		locks[a.str("new_handle")] = l
		return lockJSON(a.str("new_handle"), l), nil
	case "check":
		l := locks[a.str("handle")]
		if err := l.Check(); err != nil {
			return nil, err
		}
		return map[string]any{"valid": true, "remaining_ms": l.Remaining().Milliseconds()}, nil
	case "valid":
		l := locks[a.str("handle")]
		return map[string]any{"valid": l.Valid(), "remaining_ms": l.Remaining().Milliseconds(), "extensions": l.Extensions()}, nil
	case "lost":
		l := locks[a.str("handle")]
		t0 := monoMs()
		select {
		case <-l.Context().Done():
		case <-time.After(a.ms("wait_ms")):
		}
		err := l.Err()
		var fe *fencelock.Error
		lost := l.Context().Err() != nil && errors.As(err, &fe) && fe.Code != "released"
		r := map[string]any{"lost": lost, "after_ms": monoMs() - t0, "code": nil, "type": nil}
		if fe != nil {
			r["code"], r["type"] = fe.Code, canonical(err)
		}
		return r, nil
	case "extend":
		return map[string]any{}, locks[a.str("handle")].Extend(ctx)
	case "release":
		return map[string]any{}, locks[a.str("handle")].Release()
	case "status":
		s, err := clients[a.client()].Status(ctx, a.str("resource"), a.str("kind"), int(a.num("permits")))
		if err != nil {
			return nil, err
		}
		held := map[string]any{}
		for _, h := range a.strs("held_by") {
			held[h] = s.HeldBy(locks[h])
		}
		hr, hc := any(nil), any(nil)
		if s.HolderRef() != "" {
			hr = s.HolderRef()
		}
		if s.HolderClient() != "" {
			hc = s.HolderClient()
		}
		return map[string]any{"status": s.Raw, "held_by": held, "holder_ref": hr, "holder_client": hc}, nil
	case "release_id":
		return clients[a.client()].Release(ctx, a.str("resource"), a.str("lock_id"), a.str("kind"))
	case "extend_id":
		ttl := 10 * time.Second
		if a.has("ttl_ms") {
			ttl = a.ms("ttl_ms")
		}
		return clients[a.client()].Extend(ctx, a.str("resource"), a.str("lock_id"), ttl, a.str("kind"))
	case "put":
		f := fence(a)
		if a.has("pause_after_check_ms") {
			// Check the lock, say so, then wait: the harness stops this
			// process here, between the check and the write, as a GC pause would.
			l := f.Lock
			if err := l.Check(); err != nil {
				return nil, err
			}
			emit(map[string]any{"id": id, "event": "checked"})
			time.Sleep(a.ms("pause_after_check_ms"))
			f.Lock, f.Token = nil, l.Token
		}
		return stores[a.client()].Put(ctx, a.str("key"), a["value"], f)
	case "get":
		f := fence(a)
		f.IfVersion, f.IfAbsent = 0, false
		noRaise := false
		if b, ok := a["raise_fence"].(bool); ok && !b {
			noRaise = true
		}
		rec, err := stores[a.client()].Get(ctx, a.str("key"), f, noRaise)
		if errors.Is(err, fencelock.ErrNotFound) {
			return map[string]any{"record": nil}, nil
		}
		if err != nil {
			return nil, err
		}
		return map[string]any{"record": rec}, nil
	case "delete":
		ok, err := stores[a.client()].Delete(ctx, a.str("key"), fence(a))
		if err != nil {
			return nil, err
		}
		return map[string]any{"deleted": ok}, nil
	case "batch":
		var ops []fencelock.Op
		for _, raw := range a["ops"].([]any) {
			op := args(raw.(map[string]any))
			var iv *uint64
			if op.has("if_version") {
				v := uint64(op.num("if_version"))
				iv = &v
			}
			switch op.str("op") {
			case "put":
				ops = append(ops, fencelock.PutOp(op.str("key"), op["value"], op.str("resource"), iv))
			case "delete":
				ops = append(ops, fencelock.DeleteOp(op.str("key"), op.str("resource"), iv))
			default:
				ops = append(ops, fencelock.CheckOp(op.str("key"), uint64(op.num("version")), op.str("resource")))
			}
		}
		f := fence(a)
		f.Resource = ""
		return stores[a.client()].Batch(ctx, ops, f)
	case "fence":
		t, err := stores[a.client()].LastToken(ctx, a.str("resource"))
		return map[string]any{"last_token": t}, err
	case "reset_fence":
		return stores[a.client()].ResetFence(ctx, a.str("resource"), uint64(a.num("token")))
	case "fenced":
		var got uint64
		err := locks[a.str("handle")].Fenced(func(ctx context.Context, token uint64) error { got = token; return nil })
		return map[string]any{"token": got}, err
	case "contend":
		return contend(a)
	case "map_error":
		body, _ := a["body"].(map[string]any)
		e := fencelock.FromAnswer(int(a.num("status")), body, "test")
		return map[string]any{"type": canonical(e), "code": e.Code}, nil
	case "ref":
		r, err := fencelock.LockRef(a.str("lock_id"))
		return map[string]any{"ref": r}, err
	case "validate":
		c := clients[a.client()]
		cases := map[string]func() error{
			"lock_empty":          func() error { _, err := c.Lock(ctx, "", nil); return err },
			"lock_ttl0":           func() error { _, err := c.Lock(ctx, "r", &fencelock.LockOptions{TTL: time.Microsecond}); return err },
			"lock_wait_neg":       func() error { _, err := c.Lock(ctx, "r", &fencelock.LockOptions{Wait: -1}); return err },
			"lock_wait_mode":      func() error { _, err := c.Lock(ctx, "r", &fencelock.LockOptions{WaitMode: "x"}); return err },
			"many_empty":          func() error { _, err := c.LockMany(ctx, nil, nil); return err },
			"semaphore_0":         func() error { _, err := c.Semaphore(ctx, "r", 0, nil); return err },
			"release_bad_id":      func() error { _, err := c.Release(ctx, "r", "xyz", ""); return err },
			"put_no_token":        func() error { _, err := stores[a.client()].Put(ctx, "k", 1, fencelock.Fence{}); return err },
			"resource_too_long":   func() error { _, err := c.Lock(ctx, string(make([]byte, 513)), nil); return err },
			"campaign_empty_name": func() error { _, err := c.Campaign(ctx, "", "v", nil); return err },
			"campaign_value_too_long": func() error {
				_, err := c.Campaign(ctx, "e", strings.Repeat("v", 257), nil)
				return err
			},
			"proclaim_bad_id": func() error { _, err := c.Proclaim(ctx, "e", "xyz", "v", time.Second); return err },
		}
		return map[string]any{}, cases[a.str("case")]()
	case "sleep":
		time.Sleep(a.ms("ms"))
		return map[string]any{}, nil
	}
	return nil, fmt.Errorf("unknown command %q", cmd)
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	for in.Scan() {
		var msg struct {
			ID   any            `json:"id"`
			Cmd  string         `json:"cmd"`
			Args map[string]any `json:"args"`
		}
		if len(in.Bytes()) == 0 {
			continue
		}
		if err := json.Unmarshal(in.Bytes(), &msg); err != nil {
			emit(map[string]any{"id": nil, "ok": false, "error": map[string]any{"type": "Unexpected", "message": err.Error()}})
			continue
		}
		if msg.Cmd == "quit" {
			emit(map[string]any{"id": msg.ID, "ok": true, "result": map[string]any{}})
			return
		}
		res, err := run(msg.ID, msg.Cmd, args(msg.Args))
		if err != nil {
			emit(map[string]any{"id": msg.ID, "ok": false, "error": errorJSON(err)})
		} else {
			emit(map[string]any{"id": msg.ID, "ok": true, "result": res})
		}
	}
}
