package h2async

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/http2"
)

// TestInterop runs h2async against HTTP/2 servers not written in Go: nginx and h2o
// (in front of the Go backend) and Node's http2 module. Each server is started once for its
// cases; without nginx or node the server's cases skip, except in CI.
func TestInterop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nginx and node")
	}
	for _, srv := range []struct {
		name  string
		start func(testing.TB) *testServer
	}{{"nginx", nginxServer}, {"node", nodeServer}, {"h2o", h2oServer}} {
		t.Run(srv.name, func(t *testing.T) {
			s := srv.start(t)
			for _, c := range interopCases {
				t.Run(c.name, func(t *testing.T) { c.run(t, s) })
			}
		})
	}
}

var interopCases = []struct {
	name string
	run  func(t *testing.T, s *testServer)
}{
	{"ALPN", interopALPN},
	{"LargeBodiesBothWays", interopLargeBodies},
	{"PushRefused", interopPushRefused},
	{"GoawayMidStream", interopGoaway},
	{"ResetMidStream", interopReset},
	{"ManyConcurrentStreams", interopManyStreams},
	{"SlowReader", interopSlowReader},
	{"Gzip", interopGzip},
}

// h2 is negotiated over TLS ALPN; a listener that offers only HTTP/1.1 is served
// through Fallback.
func interopALPN(t *testing.T, s *testServer) {
	tr := s.h2async(t)
	resp := do(t, tr, http.MethodGet, s.url+"/status?code=200", nil)
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "status 200\n" {
		t.Fatalf("body %q, %v", body, err)
	}
	if resp.Proto != "HTTP/2.0" || resp.TLS == nil || resp.TLS.NegotiatedProtocol != "h2" {
		t.Fatalf("proto %q, TLS %+v; want HTTP/2.0 negotiated as h2", resp.Proto, resp.TLS)
	}
	if s.h1URL == "" {
		return
	}
	resp = do(t, tr, http.MethodGet, s.h1URL+"/", nil)
	body, err = io.ReadAll(resp.Body)
	if err != nil || string(body) != "h1\n" || resp.ProtoMajor != 1 {
		t.Fatalf("HTTP/1.1-only listener: %s %q, %v", resp.Proto, body, err)
	}
}

// Bodies many times the flow-control windows go up and down, several at once.
func interopLargeBodies(t *testing.T, s *testServer) {
	tr := s.h2async(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := range 2 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			up := make([]byte, 6<<20+i)
			for j := range up {
				up[j] = byte(rand.IntN(256))
			}
			sum := sha256.Sum256(up)
			resp, err := roundTrip(tr, http.MethodPost, s.url+"/echo", up)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			down, err := io.ReadAll(resp.Body)
			if err != nil || !bytes.Equal(down, up) || resp.Header.Get("X-Sha256") != hex.EncodeToString(sum[:]) {
				errs <- fmt.Errorf("echo of %d bytes: got %d bytes (equal %v), server sha %s, %v", len(up), len(down), bytes.Equal(down, up), resp.Header.Get("X-Sha256"), err)
			}
		}()
		go func() {
			defer wg.Done()
			n := 8<<20 + 7*i
			resp, err := roundTrip(tr, http.MethodGet, fmt.Sprintf("%s/bytes?n=%d", s.url, n), nil)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			down, err := io.ReadAll(resp.Body)
			if err != nil || !bytes.Equal(down, pattern(n)) {
				errs <- fmt.Errorf("download of %d bytes: got %d, %v", n, len(down), err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// The client sends SETTINGS_ENABLE_PUSH=0, so the server must not push: Node
// reports the setting and refuses pushStream; nginx (http2_push on /push) and h2o
// (a Link: preload header) send no PUSH_PROMISE, which would fail the request. A PUSH_PROMISE sent anyway is
// TestPushPromiseFailsConnection's case.
func interopPushRefused(t *testing.T, s *testServer) {
	tr := s.h2async(t)
	resp := do(t, tr, http.MethodGet, s.url+"/push", nil)
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !s.node {
		if string(body) != "push\n" {
			t.Fatalf("body %q", body)
		}
		return
	}
	var got struct {
		PushAllowed bool
		EnablePush  bool
		PushError   string
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.PushAllowed || got.EnablePush || got.PushError != "ERR_HTTP2_PUSH_DISABLED" {
		t.Fatalf("server saw push allowed %v, SETTINGS_ENABLE_PUSH %v, pushStream error %q; want false, false, ERR_HTTP2_PUSH_DISABLED", got.PushAllowed, got.EnablePush, got.PushError)
	}
}

// A GOAWAY in the middle of a response lets that response finish, and later
// requests go to a new connection (Node: session.goaway() while a body streams;
// nginx: GOAWAY after every tenth request while a hundred are under way).
func interopGoaway(t *testing.T, s *testServer) {
	tr := s.h2async(t)
	if s.node {
		a := do(t, tr, http.MethodGet, s.url+"/goaway?ms=200", nil)
		first := make([]byte, len("before goaway\n"))
		if _, err := io.ReadFull(a.Body, first); err != nil {
			t.Fatal(err)
		}
		b := do(t, tr, http.MethodGet, s.url+"/status?code=200", nil)
		io.Copy(io.Discard, b.Body)
		rest, err := io.ReadAll(a.Body)
		if err != nil || string(rest) != "after goaway\n" {
			t.Fatalf("the body after GOAWAY: %q, %v", rest, err)
		}
		if a.Header.Get("X-Session") == b.Header.Get("X-Session") {
			t.Fatalf("a request after GOAWAY went on the same connection (session %s)", a.Header.Get("X-Session"))
		}
		return
	}
	if s.goawayURL == "" {
		t.Skip("no GOAWAY listener")
	}
	errs := make(chan error, 100)
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf("request %d", i)
			resp, err := roundTrip(tr, http.MethodPost, s.goawayURL+"/echo", []byte(body))
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if err != nil || string(got) != body {
				errs <- fmt.Errorf("%s: got %q, %v", body, got, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A stream reset (or cut) after part of its body reaches the reader as an error,
// never as a clean end of a short body.
func interopReset(t *testing.T, s *testServer) {
	if s.cutsCleanly {
		t.Skip("this server ends a cut response cleanly (TestDifferential checks net/http sees the same)")
	}
	tr := s.h2async(t)
	resp := do(t, tr, http.MethodGet, s.url+"/abort?after=1000", nil)
	got, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Fatalf("read %d bytes and a clean EOF from a response the server cut", len(got))
	}
	if !bytes.Equal(got, pattern(len(got))) || len(got) > 1000 {
		t.Fatalf("read %d bytes before the error, not the start of the body", len(got))
	}
	var se http2.StreamError
	if s.node && (!errors.As(err, &se) || se.Code != http2.ErrCodeInternal) {
		t.Fatalf("error %v; want the server's RST_STREAM(INTERNAL_ERROR)", err)
	}
	// The connection carries on.
	b := do(t, tr, http.MethodGet, s.url+"/status?code=200", nil)
	if body, err := io.ReadAll(b.Body); err != nil || string(body) != "status 200\n" {
		t.Fatalf("after the reset: %q, %v", body, err)
	}
}

// Hundreds of requests at once, beyond the server's concurrent-stream limit
// (nginx 128, Node 100), each get their own answer.
func interopManyStreams(t *testing.T, s *testServer) {
	tr := s.h2async(t)
	const n = 400
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf("stream %d %s", i, strings.Repeat("x", i))
			resp, err := roundTrip(tr, http.MethodPost, s.url+"/echo", []byte(body))
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if err != nil || string(got) != body {
				errs <- fmt.Errorf("request %d: got %.40q, %v", i, got, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A response nobody reads stalls only its own stream: others on the connection
// complete, and the stalled one still reads whole afterwards.
func interopSlowReader(t *testing.T, s *testServer) {
	tr := s.h2async(t)
	const n = 4 << 20
	stalled := do(t, tr, http.MethodGet, fmt.Sprintf("%s/bytes?n=%d", s.url, n), nil)
	for range 3 {
		resp := do(t, tr, http.MethodGet, fmt.Sprintf("%s/bytes?n=%d", s.url, n), nil)
		got, err := io.ReadAll(resp.Body)
		if err != nil || !bytes.Equal(got, pattern(n)) {
			t.Fatalf("while another response is not read: %d bytes, %v", len(got), err)
		}
	}
	got, err := io.ReadAll(stalled.Body)
	if err != nil || !bytes.Equal(got, pattern(n)) {
		t.Fatalf("the stalled response: %d bytes, %v", len(got), err)
	}
}

// Accept-Encoding: gzip is sent and the answer decompressed, as net/http does; a
// caller that asks for gzip itself gets the compressed bytes.
func interopGzip(t *testing.T, s *testServer) {
	tr := s.h2async(t)
	want := strings.Repeat("the quick brown fox jumps over the lazy dog\n", 1000)
	resp := do(t, tr, http.MethodGet, s.url+"/text?n=1000", nil)
	got, err := io.ReadAll(resp.Body)
	if err != nil || string(got) != want {
		t.Fatalf("body %.50q… (%d bytes), %v; want the text", got, len(got), err)
	}
	if !resp.Uncompressed || resp.Header.Get("Content-Encoding") != "" {
		t.Fatalf("Uncompressed %v, Content-Encoding %q: the answer was not gzipped", resp.Uncompressed, resp.Header.Get("Content-Encoding"))
	}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, s.url+"/text?n=1000", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err = tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.Header.Get("Content-Encoding") != "gzip" || resp.Uncompressed || len(raw) >= len(want) {
		t.Fatalf("asked for gzip: Content-Encoding %q, Uncompressed %v, %d bytes", resp.Header.Get("Content-Encoding"), resp.Uncompressed, len(raw))
	}
}

// roundTrip sends one request (body may be nil) without a test helper's Fatal, for
// use from goroutines.
func roundTrip(rt http.RoundTripper, method, url string, body []byte) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		return nil, err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	return resp, nil
}
