package h2async

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// newH2Server starts Go's own HTTP/2 server over TLS; configure may change it
// before it starts.
func newH2Server(t testing.TB, h http.Handler, configure ...func(*httptest.Server)) *httptest.Server {
	ts := httptest.NewUnstartedServer(h)
	ts.EnableHTTP2 = true
	for _, f := range configure {
		f(ts)
	}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts
}

// newTransport trusts the test server's certificate.
func newTransport(t testing.TB, cert *x509.Certificate) *Transport {
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	tr := &Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

type result struct {
	resp *http.Response
	err  error
}

// startAsync calls Start and returns where done's outcome arrives.
func startAsync(tr *Transport, req *http.Request) <-chan result {
	ch := make(chan result, 1)
	tr.Start(req, func(resp *http.Response, err error) { ch <- result{resp, err} })
	return ch
}

func await(t testing.TB, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("done was not called within 10s")
		return result{}
	}
}

func mustGet(t testing.TB, tr *Transport, url string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return mustDo(t, tr, req)
}

// mustDo sends req and returns its whole body.
func mustDo(t testing.TB, tr *Transport, req *http.Request) string {
	t.Helper()
	url := req.URL
	r := await(t, startAsync(tr, req))
	if r.err != nil {
		t.Fatalf("GET %s: %v", url, r.err)
	}
	defer r.resp.Body.Close()
	b, err := io.ReadAll(r.resp.Body)
	if err != nil {
		t.Fatalf("reading %s: %v", url, err)
	}
	return string(b)
}

// waitFor polls cond until it holds or 10s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// connStats reports the transport's live connections and their seated streams.
func (t *Transport) connStats() (conns, streams int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.pools {
		for _, c := range p.conns {
			conns++
			streams += c.reserved
		}
	}
	return conns, streams
}

// newRawServer accepts TLS connections that negotiate h2 and gives each,
// after the client preface, to serve: a hand-driven HTTP/2 peer for cases Go's
// server cannot be made to produce (GOAWAY mid-traffic, unanswered PINGs).
// Its goroutines are the server's, not the transport's.
func newRawServer(t testing.TB, serve func(n int, rc *rawConn)) *httptest.Server {
	return newRawServerWith(t, nil, serve)
}

// newRawServerWith is newRawServer whose first SETTINGS frame adds settings.
func newRawServerWith(t testing.TB, settings []http2.Setting, serve func(n int, rc *rawConn)) *httptest.Server {
	var mu sync.Mutex
	n := 0
	return newH2Server(t, http.NotFoundHandler(), func(ts *httptest.Server) {
		ts.Config.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){
			"h2": func(_ *http.Server, c *tls.Conn, _ http.Handler) {
				mu.Lock()
				n++
				i := n
				mu.Unlock()
				serveRawConn(c, settings, func(rc *rawConn) { serve(i, rc) })
			},
		}
	})
}

// serveRawConn reads the client preface, sends SETTINGS (a 100-stream limit
// plus settings) and hands the connection to serve; it closes the connection
// when serve returns.
func serveRawConn(c *tls.Conn, settings []http2.Setting, serve func(rc *rawConn)) {
	defer c.Close()
	br := bufio.NewReader(c)
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(br, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	fr := http2.NewFramer(c, br)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	rc := &rawConn{c: c, fr: fr}
	settings = append([]http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: 100}}, settings...)
	rc.write(func() error { return fr.WriteSettings(settings...) })
	serve(rc)
}

func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

type rawConn struct {
	c  *tls.Conn
	fr *http2.Framer
	mu sync.Mutex // serialises writes
}

func (rc *rawConn) write(f func() error) error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return f()
}

// respond writes a complete 200 response on stream id.
// readFrame reads the client's next frame, acknowledging its SETTINGS on the way (a
// SETTINGS frame is not returned).
func (rc *rawConn) readFrame() (http2.Frame, error) {
	for {
		f, err := rc.fr.ReadFrame()
		if err != nil {
			return nil, err
		}
		if sf, ok := f.(*http2.SettingsFrame); ok {
			if !sf.IsAck() {
				rc.write(rc.fr.WriteSettingsAck)
			}
			continue
		}
		return f, nil
	}
}

func (rc *rawConn) respond(id uint32, body string) error {
	var hb []byte
	enc := hpack.NewEncoder(writerFunc(func(p []byte) (int, error) { hb = append(hb, p...); return len(p), nil }))
	enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
	return rc.write(func() error {
		if err := rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb, EndHeaders: true}); err != nil {
			return err
		}
		return rc.fr.WriteData(id, true, []byte(body))
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// ctxRequest builds a GET bound to ctx.
func ctxRequest(t testing.TB, ctx context.Context, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
