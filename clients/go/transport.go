package fencelock

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Options of a Client or a StorageGuard. The zero value is the defaults.
type Options struct {
	// Token is the bearer token (the server's --auth-file).
	Token string
	// CAFile is the PEM file of the certificate authority an https:// server
	// is checked against (default: the system's).
	CAFile string
	// Timeout bounds each answer, on top of an acquisition's own wait
	// (default 10 s).
	Timeout time.Duration
	// MaxConns is the connections kept open (default 64).
	MaxConns int
	// HTTPClient, if set, is used as it is (Token is still sent; CAFile and
	// MaxConns are then its Transport's business).
	HTTPClient *http.Client
}

const userAgent = "fencelock-go/0.1.0"

type transport struct {
	base    string
	token   string
	timeout time.Duration
	hc      *http.Client
	own     *http.Transport
}

func newTransport(rawURL string, o *Options) (*transport, error) {
	if o == nil {
		o = &Options{}
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("fencelock: the url must be http://HOST[:PORT] or https://HOST[:PORT], not %q", rawURL)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("fencelock: the url takes no path, query or fragment: %q", rawURL)
	}
	if o.Token != "" && strings.ContainsAny(o.Token, " \t\r\n") {
		return nil, errors.New("fencelock: the token holds whitespace")
	}
	if o.Timeout < 0 || o.MaxConns < 0 {
		return nil, errors.New("fencelock: Timeout and MaxConns must not be negative")
	}
	if o.CAFile != "" && u.Scheme != "https" {
		return nil, errors.New("fencelock: CAFile is for an https:// url")
	}
	t := &transport{base: u.Scheme + "://" + u.Host, token: o.Token, timeout: o.Timeout}
	if t.timeout == 0 {
		t.timeout = 10 * time.Second
	}
	if o.HTTPClient != nil {
		t.hc = o.HTTPClient
		return t, nil
	}
	conns := o.MaxConns
	if conns == 0 {
		conns = 64
	}
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		// fencelockd and storage-guard close a connection idle for 30 s.
		IdleConnTimeout:     25 * time.Second,
		TLSHandshakeTimeout: 5 * time.Second,
	}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("fencelock: CAFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("fencelock: CAFile %s holds no PEM certificate", o.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	t.own = tr
	t.hc = &http.Client{Transport: tr}
	return t, nil
}

func (t *transport) close() {
	if t.own != nil {
		t.own.CloseIdleConnections()
	}
}

// do sends one request and parses a JSON answer (any status). A failure
// with no answer is an *Error of kind ErrCanceled (ctx ended),
// ErrTimeout (timeout passed) or ErrUnreachable.
func (t *transport) do(ctx context.Context, method, path string, body any, headers map[string]string,
	timeout time.Duration, what string) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, fmt.Errorf("fencelock: %s: %w", what, err)
		}
		rd = bytes.NewReader(b)
	}
	if timeout <= 0 {
		timeout = t.timeout
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, method, t.base+path, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("fencelock: %s: %w", what, err)
	}
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if t.token != "" {
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		return 0, nil, t.failure(ctx, rctx, err, what, timeout)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, nil, t.failure(ctx, rctx, err, what, timeout)
	}
	if len(raw) == 0 {
		return resp.StatusCode, nil, nil
	}
	if !strings.Contains(resp.Header.Get("Content-Type"), "json") {
		if resp.StatusCode >= 400 {
			return resp.StatusCode, nil, nil // an HTML page from the HTTP layer: the status decides
		}
		return resp.StatusCode, nil, &Error{Status: resp.StatusCode, Code: "protocol", Kind: ErrProtocol,
			Message: what + ": the answer is not JSON"}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return resp.StatusCode, nil, &Error{Status: resp.StatusCode, Code: "protocol", Kind: ErrProtocol,
			Message: what + ": the answer is not a JSON object", cause: err}
	}
	return resp.StatusCode, obj, nil
}

func (t *transport) failure(ctx, rctx context.Context, err error, what string, timeout time.Duration) error {
	if ctx.Err() != nil {
		return clientError(ErrCanceled, "canceled", what+": canceled", ctx.Err())
	}
	if rctx.Err() != nil {
		return clientError(ErrTimeout, "timeout", fmt.Sprintf("%s: no answer from %s within %v", what, t.base, timeout), err)
	}
	return clientError(ErrUnreachable, "unreachable", fmt.Sprintf("%s: %s: %v", what, t.base, err), err)
}

// call: one request whose success is 200 with a JSON object.
func (t *transport) call(ctx context.Context, method, path string, body any, what string, timeout time.Duration) (map[string]any, error) {
	status, obj, err := t.do(ctx, method, path, body, nil, timeout, what)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, FromAnswer(status, obj, what)
	}
	if obj == nil {
		return nil, &Error{Status: status, Code: "protocol", Kind: ErrProtocol, Message: what + ": no JSON object"}
	}
	return obj, nil
}
