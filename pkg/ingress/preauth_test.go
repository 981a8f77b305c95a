package ingress_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/batch"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/ingress"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// guardedAPI is the ingress with tenant "a" (key ka), files and batches, over real
// NATS and Redis, served by its own http.Server (Server.HTTPServer) on loopback. Its
// BodyTimeout is short and its UploadTimeout an hour: an answer that waits for either
// comes far too late for the tests below.
func guardedAPI(t *testing.T, maxUnauth int, adjust ...func(*ingress.Options)) *httptest.Server {
	t.Helper()
	b, _ := bustest.New(t)
	rdb, prefix := testenv.Redis(t)
	store := state.New(rdb, prefix, time.Hour)
	log := slog.New(slog.DiscardHandler)
	keys, err := ingress.NewTenants([]config.Tenant{{ID: "a", APIKeys: []string{"ka"}}})
	if err != nil {
		t.Fatal(err)
	}
	batches := &batch.Service{Bus: b, Store: batch.StoreOf(store), Ender: jobs.NewEnder(store.Jobs, b, nil, nil), Models: []string{"m1"}, Log: log}
	o := ingress.Options{Bus: b, Store: ingress.StoreOf(store), Models: []string{"m1"}, MaxBody: 1 << 20, Log: log, Tenants: keys, Batches: batches,
		JobTimeout: time.Minute, SyncWait: time.Minute, BodyTimeout: 300 * time.Millisecond, UploadTimeout: time.Hour,
		MaxUnauthenticatedConns: maxUnauth}
	for _, a := range adjust {
		a(&o)
	}
	s := ingress.New(o)
	ts := httptest.NewUnstartedServer(nil)
	ts.Config = s.HTTPServer(10*time.Second, 0)
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

// rawConn dials ts. The read deadline only keeps a broken server from hanging the
// test: it is far shorter than the upload timeout and far longer than any answer
// needs.
func rawConn(t *testing.T, ts *httptest.Server) (net.Conn, *bufio.Reader) {
	t.Helper()
	return rawConnFrom(t, ts, "127.0.0.1")
}

// rawConnFrom dials ts from the loopback address source.
func rawConnFrom(t *testing.T, ts *httptest.Server, source string) (net.Conn, *bufio.Reader) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}
	c, err := d.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return c, bufio.NewReader(c)
}

// A multipart request that sends its headers and then none of its body is answered
// at once on every route class when it is not authenticated (health check, JSON
// route, the upload route, an unknown path): no route reads a body, or grants the
// upload timeout, before authentication, and an answer given without reading the
// body does not wait for it.
func TestUnauthenticatedMultipartAnsweredAtOnce(t *testing.T) {
	t.Parallel()
	ts := guardedAPI(t, 0)
	cases := []struct {
		method, path string
		status       int
	}{
		{"GET", "/healthz", 200},
		{"POST", "/v1/chat/completions", 401},
		{"POST", "/v1/files", 401},
		{"POST", "/v1/nothing", 404},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			t.Parallel()
			conn, br := rawConn(t, ts)
			// The body (1000 bytes, less than net/http drains after a handler) never comes.
			fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: fleet\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 1000\r\n\r\n", c.method, c.path)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer before the client gave up (the server waits for the body): %v", err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Errorf("%s %s: %d, want %d", c.method, c.path, resp.StatusCode, c.status)
			}
			// The unread body is never read as the next request: the connection ends.
			if !resp.Close {
				t.Errorf("%s %s: the connection is kept open after an unread body", c.method, c.path)
			}
		})
	}
}

// An authenticated upload keeps the long upload timeout: its body may take longer
// than BodyTimeout (here it pauses for three BodyTimeouts mid-body) and is stored.
func TestAuthenticatedUploadGetsUploadTimeout(t *testing.T) {
	t.Parallel()
	ts := guardedAPI(t, 0)
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	mw.WriteField("purpose", "batch")
	fw, _ := mw.CreateFormFile("file", "in.jsonl")
	fw.Write([]byte(`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m1","messages":[{"role":"user","content":"hi"}]}}` + "\n"))
	mw.Close()
	body := buf.Bytes()
	conn, br := rawConn(t, ts)
	fmt.Fprintf(conn, "POST /v1/files HTTP/1.1\r\nHost: fleet\r\nAuthorization: Bearer ka\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", mw.FormDataContentType(), len(body))
	conn.Write(body[:len(body)/2])
	time.Sleep(900 * time.Millisecond) // three BodyTimeouts, far below UploadTimeout
	conn.Write(body[len(body)/2:])
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(got), `"purpose":"batch"`) {
		t.Errorf("a slow authenticated upload: %d %s", resp.StatusCode, got)
	}
}

// At most MaxUnauthenticatedConns connections may be open without having carried an
// authenticated request: one more is answered 503 and closed before its request is
// read; once a connection authenticates, it no longer counts.
func TestUnauthenticatedConnectionsCapped(t *testing.T) {
	t.Parallel()
	ts := guardedAPI(t, 2)
	get := func(conn net.Conn, br *bufio.Reader, path, headers string) (int, error) {
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: fleet\r\n%s\r\n", path, headers)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	c1, b1 := rawConn(t, ts)
	c2, b2 := rawConn(t, ts)
	for _, c := range []struct {
		c net.Conn
		b *bufio.Reader
	}{{c1, b1}, {c2, b2}} {
		if code, err := get(c.c, c.b, "/healthz", ""); code != 200 {
			t.Fatalf("healthz within the bound: %d %v", code, err)
		}
	}
	// Two idle connections that never authenticated: the third is refused.
	c3, b3 := rawConn(t, ts)
	resp, err := http.ReadResponse(b3, nil)
	if err != nil || resp.StatusCode != 503 || !resp.Close {
		t.Fatalf("a connection over the bound: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	if _, err := b3.ReadByte(); err == nil {
		t.Error("the refused connection stays open")
	}
	c3.Close()
	// c1 authenticates: it no longer counts, so a new connection is served.
	if code, err := get(c1, b1, "/v1/models", "Authorization: Bearer ka\r\n"); code != 200 {
		t.Fatalf("an authenticated request: %d %v", code, err)
	}
	c4, b4 := rawConn(t, ts)
	if code, err := get(c4, b4, "/healthz", ""); code != 200 {
		t.Errorf("a connection within the bound again: %d %v", code, err)
	}
}

// One source holding its share of the unauthenticated connections does not stop
// another source's new connections; an unauthenticated connection left idle is
// closed, an authenticated one is not counted.
func TestConnectionGateSharedPerSource(t *testing.T) {
	t.Parallel()
	ts := guardedAPI(t, 10, func(o *ingress.Options) {
		o.MaxUnauthenticatedConnsPerSource = 2
	})
	get := func(conn net.Conn, br *bufio.Reader, path string) (int, error) {
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: fleet\r\n\r\n", path)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	for range 2 {
		c, br := rawConnFrom(t, ts, "127.0.0.1")
		if code, err := get(c, br, "/healthz"); code != 200 {
			t.Fatalf("healthz within the source's share: %d %v", code, err)
		}
	}
	_, b3 := rawConnFrom(t, ts, "127.0.0.1")
	if resp, err := http.ReadResponse(b3, nil); err != nil || resp.StatusCode != 503 {
		t.Fatalf("a third connection of the same source: %v %v, want 503", resp, err)
	}
	c, br := rawConnFrom(t, ts, "127.0.0.2")
	if code, err := get(c, br, "/healthz"); code != 200 {
		t.Errorf("another source's connection while the first holds its share: %d %v", code, err)
	}
}

// A connection that never authenticated and is left idle is closed after
// UnauthenticatedIdle.
func TestUnauthenticatedIdleConnectionClosed(t *testing.T) {
	t.Parallel()
	ts := guardedAPI(t, 10, func(o *ingress.Options) { o.UnauthenticatedIdle = 50 * time.Millisecond })
	c, br := rawConn(t, ts)
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: fleet\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	if _, err := br.ReadByte(); err == nil || os.IsTimeout(err) {
		t.Errorf("an idle connection without a key stays open (%v)", err)
	}
}
