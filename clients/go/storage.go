package fencelock

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// StorageGuard is a client of one storage-guard (docs/storage-guard.md):
// records, conditional writes, batches, deletes, fences and the audit log.
// Safe for concurrent use.
type StorageGuard struct {
	t *transport
}

// NewStorageGuard makes a client of the storage-guard at url (like
// "http://127.0.0.1:8080"); opts as New's.
func NewStorageGuard(url string, opts *Options) (*StorageGuard, error) {
	t, err := newTransport(url, opts)
	if err != nil {
		return nil, err
	}
	return &StorageGuard{t: t}, nil
}

// Close closes the idle connections.
func (s *StorageGuard) Close() { s.t.close() }

// Fence says what a fenced call sends: a held Lock (checked valid first,
// then its token: ErrLost and nothing sent if it is not valid), or a Token
// as it is. Resource names the lock when it is not the key.
type Fence struct {
	Lock     *Lock
	Token    uint64
	Resource string
	// IfVersion: only if the record is at this version; with IfAbsent, only
	// if there is no record; with IfExists, only if there is one.
	IfVersion uint64
	IfAbsent  bool
	IfExists  bool
}

const keyMax = 1024

func checkKey(k, name string) error {
	if len(k) == 0 || len(k) > keyMax || strings.IndexByte(k, 0) >= 0 {
		return fmt.Errorf("fencelock: %s must be 1..%d bytes without NUL", name, keyMax)
	}
	return nil
}

func (f *Fence) token(required bool) (uint64, error) {
	if f.Lock != nil && f.Token != 0 {
		return 0, fmt.Errorf("fencelock: give Lock or Token, not both")
	}
	t := f.Token
	if f.Lock != nil {
		if err := f.Lock.Check(); err != nil {
			return 0, err
		}
		t = f.Lock.Token
	}
	if t == 0 && required {
		return 0, fmt.Errorf("fencelock: a fenced operation needs a Lock or a Token")
	}
	if t > TokenMax {
		return 0, fmt.Errorf("fencelock: tokens are below 2^53, not %d", t)
	}
	return t, nil
}

func (f *Fence) headers(t uint64) (map[string]string, error) {
	h := map[string]string{}
	if t != 0 {
		h["Fencing-Token"] = strconv.FormatUint(t, 10)
	}
	n := 0
	if f.IfVersion != 0 {
		n++
		h["If-Match"] = fmt.Sprintf("%q", strconv.FormatUint(f.IfVersion, 10))
	}
	if f.IfAbsent {
		n++
		h["If-None-Match"] = "*"
	}
	if f.IfExists {
		n++
		h["If-Match"] = "*"
	}
	if n > 1 {
		return nil, fmt.Errorf("fencelock: give one of IfVersion, IfAbsent, IfExists")
	}
	return h, nil
}

func (s *StorageGuard) send(ctx context.Context, method, path string, body any, h map[string]string, what string,
	notFoundOK bool) (map[string]any, error) {
	status, obj, err := s.t.do(ctx, method, path, body, h, 0, what)
	if err != nil {
		return nil, err
	}
	if status == http.StatusNotFound && notFoundOK {
		return nil, FromAnswer(status, obj, what)
	}
	if status != http.StatusOK {
		return nil, FromAnswer(status, obj, what)
	}
	if obj == nil {
		return nil, &Error{Status: status, Code: "protocol", Kind: ErrProtocol, Message: what + ": no JSON object"}
	}
	return obj, nil
}

// Put writes value (anything encoding/json takes) under key, fenced. The
// answer: key, version, token, resource, previous_token. Errors:
// ErrStaleToken (409), ErrVersionMismatch (412), ErrLost, ...
func (s *StorageGuard) Put(ctx context.Context, key string, value any, f Fence) (map[string]any, error) {
	if err := checkKey(key, "key"); err != nil {
		return nil, err
	}
	t, err := f.token(true)
	if err != nil {
		return nil, err
	}
	h, err := f.headers(t)
	if err != nil {
		return nil, err
	}
	body := map[string]any{"value": value}
	if f.Resource != "" {
		if err := checkKey(f.Resource, "resource"); err != nil {
			return nil, err
		}
		body["resource"] = f.Resource
	}
	return s.send(ctx, "PUT", "/v1/records/"+quote(key), body, h, fmt.Sprintf("put %q", key), false)
}

// Get reads a record; ErrNotFound if there is none. With a Lock or Token
// in f the read is fenced (admitted like a write); NoRaise makes it a read
// lock holder's read, which never moves the fence.
func (s *StorageGuard) Get(ctx context.Context, key string, f Fence, noRaise bool) (map[string]any, error) {
	if err := checkKey(key, "key"); err != nil {
		return nil, err
	}
	t, err := f.token(false)
	if err != nil {
		return nil, err
	}
	var q []string
	if noRaise {
		if t == 0 {
			return nil, fmt.Errorf("fencelock: a reader's read (noRaise) needs a Lock or a Token")
		}
		q = append(q, "raise=0")
	}
	if f.Resource != "" {
		if t == 0 {
			return nil, fmt.Errorf("fencelock: Resource is for a fenced read: give a Lock or a Token")
		}
		if err := checkKey(f.Resource, "resource"); err != nil {
			return nil, err
		}
		q = append(q, "resource="+quote(f.Resource))
	}
	h := map[string]string{}
	if t != 0 {
		h["Fencing-Token"] = strconv.FormatUint(t, 10)
	}
	path := "/v1/records/" + quote(key)
	if len(q) > 0 {
		path += "?" + strings.Join(q, "&")
	}
	return s.send(ctx, "GET", path, nil, h, fmt.Sprintf("get %q", key), true)
}

// Delete deletes a record, fenced like a write; false if there was none.
func (s *StorageGuard) Delete(ctx context.Context, key string, f Fence) (bool, error) {
	if err := checkKey(key, "key"); err != nil {
		return false, err
	}
	t, err := f.token(true)
	if err != nil {
		return false, err
	}
	h, err := f.headers(t)
	if err != nil {
		return false, err
	}
	path := "/v1/records/" + quote(key)
	if f.Resource != "" {
		if err := checkKey(f.Resource, "resource"); err != nil {
			return false, err
		}
		path += "?resource=" + quote(f.Resource)
	}
	_, err = s.send(ctx, "DELETE", path, nil, h, fmt.Sprintf("delete %q", key), true)
	if fe, ok := err.(*Error); ok && fe.Kind == ErrNotFound {
		return false, nil
	}
	return err == nil, err
}

// Op is one operation of a batch: PutOp, DeleteOp or CheckOp.
type Op map[string]any

// PutOp is a put of a batch (ifVersion nil: none).
func PutOp(key string, value any, resource string, ifVersion *uint64) Op {
	o := Op{"op": "put", "key": key, "value": value}
	if resource != "" {
		o["resource"] = resource
	}
	if ifVersion != nil {
		o["if_version"] = *ifVersion
	}
	return o
}

// DeleteOp is a delete of a batch.
func DeleteOp(key, resource string, ifVersion *uint64) Op {
	o := Op{"op": "delete", "key": key}
	if resource != "" {
		o["resource"] = resource
	}
	if ifVersion != nil {
		o["if_version"] = *ifVersion
	}
	return o
}

// CheckOp is a version check of a batch (0: the record must not exist).
func CheckOp(key string, version uint64, resource string) Op {
	o := Op{"op": "check", "key": key, "version": version}
	if resource != "" {
		o["resource"] = resource
	}
	return o
}

// Batch runs puts, deletes and checks under one token, all or nothing.
func (s *StorageGuard) Batch(ctx context.Context, ops []Op, f Fence) (map[string]any, error) {
	if len(ops) < 1 || len(ops) > 100 {
		return nil, fmt.Errorf("fencelock: a batch holds 1..100 operations, not %d", len(ops))
	}
	for _, o := range ops {
		k, _ := o["key"].(string)
		op, _ := o["op"].(string)
		if op != "put" && op != "delete" && op != "check" {
			return nil, fmt.Errorf("fencelock: each op is a PutOp, DeleteOp or CheckOp")
		}
		if err := checkKey(k, "key"); err != nil {
			return nil, err
		}
	}
	t, err := f.token(true)
	if err != nil {
		return nil, err
	}
	return s.send(ctx, "POST", "/v1/batch", map[string]any{"ops": ops},
		map[string]string{"Fencing-Token": strconv.FormatUint(t, 10)}, "batch", false)
}

// LastToken is the last token admitted for resource (0: none yet).
func (s *StorageGuard) LastToken(ctx context.Context, resource string) (uint64, error) {
	if err := checkKey(resource, "resource"); err != nil {
		return 0, err
	}
	obj, err := s.send(ctx, "GET", "/v1/fences/"+quote(resource), nil, nil, fmt.Sprintf("fence %q", resource), false)
	if err != nil {
		return 0, err
	}
	n, _ := toUint(obj["last_token"])
	return n, nil
}

// ResetFence is an operator's reset of a fence (admin clients only;
// ErrForbidden otherwise). It breaks the fencing guarantee: read
// storage-guard.md first.
func (s *StorageGuard) ResetFence(ctx context.Context, resource string, token uint64) (map[string]any, error) {
	if err := checkKey(resource, "resource"); err != nil {
		return nil, err
	}
	if token > TokenMax {
		return nil, fmt.Errorf("fencelock: tokens are below 2^53")
	}
	return s.send(ctx, "POST", "/v1/fences/"+quote(resource)+"/reset", map[string]any{"token": token}, nil,
		fmt.Sprintf("reset fence %q", resource), false)
}

// Log reads a page of the audit log (resource, key: "" for all; after 0:
// from the start; limit 0: the server's default).
func (s *StorageGuard) Log(ctx context.Context, resource, key string, after uint64, limit int) (map[string]any, error) {
	var q []string
	if resource != "" {
		q = append(q, "resource="+quote(resource))
	}
	if key != "" {
		q = append(q, "key="+quote(key))
	}
	if after > 0 {
		q = append(q, "after="+strconv.FormatUint(after, 10))
	}
	if limit < 0 || limit > 1000 {
		return nil, fmt.Errorf("fencelock: limit must be 1..1000")
	}
	if limit > 0 {
		q = append(q, "limit="+strconv.Itoa(limit))
	}
	path := "/v1/log"
	if len(q) > 0 {
		path += "?" + strings.Join(q, "&")
	}
	return s.send(ctx, "GET", path, nil, nil, "log", false)
}
