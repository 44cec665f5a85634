// Lock + release cycles/s of the Go client against one fencelockd, or of the
// plainest keep-alive HTTP loop in Go (net/http with one shared Transport),
// for bench/clients-bench.py. One JSON line on stdout.
//
//	bench client|raw WORKERS SECONDS URL
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"fencelock"
)

func main() {
	mode := os.Args[1]
	workers, _ := strconv.Atoi(os.Args[2])
	seconds, _ := strconv.ParseFloat(os.Args[3], 64)
	url := os.Args[4]
	conns := workers
	if conns < 64 {
		conns = 64
	}
	var stop atomic.Bool
	var acqNs, relNs atomic.Int64
	counts := make([]int, workers)
	var wg sync.WaitGroup
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns}}
	client, err := fencelock.New(url, &fencelock.Options{MaxConns: conns})
	if err != nil {
		panic(err)
	}
	raw := func(w int) {
		body := []byte(`{"ttl_ms":10000}`)
		for !stop.Load() {
			preq, _ := http.NewRequest("POST", fmt.Sprintf("%s/v1/locks/bench%%3Ago%%3A%d", url, w), bytes.NewReader(body))
			preq.Header.Set("Content-Type", "application/json")
			ta := time.Now()
			resp, err := hc.Do(preq)
			if err != nil {
				panic(err)
			}
			var g struct {
				Links struct{ Release string } `json:"links"`
			}
			err = json.NewDecoder(resp.Body).Decode(&g)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				panic(fmt.Sprint("raw: ", resp.StatusCode, err))
			}
			acqNs.Add(int64(time.Since(ta)))
			req, _ := http.NewRequest("DELETE", url+g.Links.Release, nil)
			tr := time.Now()
			resp, err = hc.Do(req)
			if err != nil {
				panic(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			relNs.Add(int64(time.Since(tr)))
			counts[w]++
		}
	}
	cl := func(w int) {
		ctx := context.Background()
		o := &fencelock.LockOptions{TTL: 10 * time.Second}
		for !stop.Load() {
			ta := time.Now()
			l, err := client.Lock(ctx, fmt.Sprintf("bench:go:%d", w), o)
			if err != nil {
				panic(err)
			}
			acqNs.Add(int64(time.Since(ta)))
			tr := time.Now()
			if err := l.Release(); err != nil {
				panic(err)
			}
			relNs.Add(int64(time.Since(tr)))
			counts[w]++
		}
	}
	t0 := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			if mode == "client" {
				cl(w)
			} else {
				raw(w)
			}
		}(w)
	}
	time.Sleep(time.Duration(seconds * float64(time.Second)))
	stop.Store(true)
	wg.Wait()
	took := time.Since(t0).Seconds()
	n := 0
	for _, c := range counts {
		n += c
	}
	out, _ := json.Marshal(map[string]any{"lang": "go", "mode": mode, "workers": workers, "cycles": n, "seconds": took, "per_s": float64(n) / took,
		"acquire_us": float64(acqNs.Load()) / float64(n) / 1e3, "release_us": float64(relNs.Load()) / float64(n) / 1e3})
	fmt.Println(string(out))
}
