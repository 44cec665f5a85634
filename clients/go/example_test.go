package fencelock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"fencelock"
)

// A lock kept alive while the work runs under its context, and the write
// sent with its token.
func Example() {
	ctx := context.Background()
	client, err := fencelock.New("http://127.0.0.1:7600", nil)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	store, _ := fencelock.NewStorageGuard("http://127.0.0.1:8080", nil)

	lock, err := client.Lock(ctx, "invoice:42", &fencelock.LockOptions{TTL: 10 * time.Second, Wait: 5 * time.Second})
	if errors.Is(err, fencelock.ErrLocked) {
		fmt.Println("busy elsewhere")
		return
	} else if err != nil {
		panic(err)
	}
	defer lock.Release()

	// The write carries the token: storage-guard refuses it (ErrStaleToken)
	// if a later holder wrote first, and nothing is sent once the lock is lost.
	if _, err := store.Put(lock.Context(), "invoice-42", map[string]any{"paid": true}, fencelock.Fence{Lock: lock}); err != nil {
		fmt.Println("not written:", err)
	}
}

// The token handed to your own database's fenced write.
func ExampleLock_Fenced() {
	var lock *fencelock.Lock // from client.Lock
	if lock == nil {
		return
	}
	_ = lock.Fenced(func(ctx context.Context, token uint64) error {
		// e.g. SELECT fencelock.admit('invoice:42', token) in the same transaction as the write
		return nil
	})
}

// A leader elected in line, writing with its epoch as the token, and an
// observer told of every change.
func ExampleClient_Campaign() {
	ctx := context.Background()
	client, err := fencelock.New("http://127.0.0.1:7600", nil)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	store, _ := fencelock.NewStorageGuard("http://127.0.0.1:8080", nil)

	leader, err := client.Campaign(ctx, "scheduler", "10.0.0.7:8080", &fencelock.CampaignOptions{Wait: time.Minute})
	if errors.Is(err, fencelock.ErrNotElected) {
		return // someone else leads: campaign again
	} else if err != nil {
		panic(err)
	}
	defer leader.Resign()
	// leader.Context() is canceled the moment it is deposed; the write carries
	// the epoch, which storage-guard refuses once a later leader has written.
	_, _ = store.Put(leader.Context(), "schedule", map[string]any{"by": leader.Value()}, fencelock.Fence{Lock: leader.Lock})
}

func ExampleClient_Watch() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client, _ := fencelock.New("http://127.0.0.1:7600", nil)
	for r := range client.Watch(ctx, "scheduler", nil) {
		if r.Err != nil {
			fmt.Println("watch ended:", r.Err)
			break
		}
		fmt.Println(r.Leader, r.Epoch, r.Value)
	}
}
