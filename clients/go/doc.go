// Package fencelock takes fenced distributed locks through fencelockd and
// writes to storage-guard with their tokens, with nothing but the standard
// library.
//
//	client, err := fencelock.New("http://127.0.0.1:7600", nil)
//	lock, err := client.Lock(ctx, "invoice:42", &fencelock.LockOptions{Wait: 5 * time.Second})
//	if err != nil { return err }
//	defer lock.Release()
//	_, err = store.Put(lock.Context(), "invoice-42", value, fencelock.Fence{Lock: lock})
//
// A lock is kept alive from this process (every third of its TTL) until it
// is released. Its Context is canceled the moment it is lost, and Check
// returns an error of kind ErrLost once it is no longer certainly held, by
// the monotonic clock, even if the process was stopped and its keep-alive
// could not run. Every error answer is an *Error that matches one of the
// Err* sentinels with errors.Is.
package fencelock

// Version of this module.
const Version = "0.1.0"
