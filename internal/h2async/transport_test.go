package h2async

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

func TestRequestAndResponseHeaders(t *testing.T) {
	big := strings.Repeat("b", 40000) // forces HEADERS + CONTINUATION
	seen := make(chan http.Header, 1)
	ts := newH2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Clone()
		h.Set("X-Proto", r.Proto)
		h.Set("X-Host", r.Host)
		h.Set("X-Len", strconv.FormatInt(r.ContentLength, 10))
		b, _ := io.ReadAll(r.Body)
		h.Set("X-Body", string(b))
		seen <- h
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints) // 1xx: skipped by the client
		w.Header().Del("Link")
		w.Header().Set("X-Big", big)
		w.Header().Add("X-Multi", "one")
		w.Header().Add("X-Multi", "two")
		w.Header().Set("Content-Length", "5")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "hello")
	}))
	tr := newTransport(t, ts.Certificate())
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/p?q=1", strings.NewReader("body!"))
	req.Header.Set("X-Test", "a")
	req.Header.Set("Connection", "keep-alive")
	req.Header.Set("Keep-Alive", "timeout=5")
	req.Header.Set("Transfer-Encoding", "chunked")
	r := await(t, startAsync(tr, req))
	if r.err != nil {
		t.Fatal(r.err)
	}
	resp := r.resp
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "hello" {
		t.Fatalf("body %q, %v", body, err)
	}
	if resp.StatusCode != 201 || resp.Status != "201 Created" || resp.Proto != "HTTP/2.0" || resp.ProtoMajor != 2 {
		t.Errorf("status line: %d %q %q %d", resp.StatusCode, resp.Status, resp.Proto, resp.ProtoMajor)
	}
	if resp.ContentLength != 5 || resp.Request != req || resp.TLS == nil {
		t.Errorf("ContentLength %d, Request same %v, TLS %v", resp.ContentLength, resp.Request == req, resp.TLS != nil)
	}
	if resp.Header.Get("X-Big") != big || len(resp.Header["X-Multi"]) != 2 || resp.Header.Get("Link") != "" {
		t.Errorf("headers: big %d bytes, multi %v, link %q", len(resp.Header.Get("X-Big")), resp.Header["X-Multi"], resp.Header.Get("Link"))
	}
	h := <-seen
	if h.Get("X-Proto") != "HTTP/2.0" || h.Get("X-Test") != "a" || h.Get("X-Len") != "5" || h.Get("X-Body") != "body!" {
		t.Errorf("server saw %v", h)
	}
	if h.Get("Connection") != "" || h.Get("Keep-Alive") != "" || h.Get("Transfer-Encoding") != "" {
		t.Errorf("connection-specific headers were sent: %v", h)
	}
	if h.Get("X-Host") != req.URL.Host || h.Get("User-Agent") == "" {
		t.Errorf("host %q, user-agent %q", h.Get("X-Host"), h.Get("User-Agent"))
	}
}

// A 3 MB body is larger than the server's windows (cut to 64 KiB here), so
// sending it needs many WINDOW_UPDATEs; three at once share the connection window.
func TestLargeRequestBodyFlowControl(t *testing.T) {
	ts := newH2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		fmt.Fprintf(w, "%d %x", n, h.Sum(nil))
	}), func(ts *httptest.Server) {
		// Go's server drops the connection on a frame above MaxReadFrameSize.
		ts.Config.HTTP2 = &http.HTTP2Config{MaxReceiveBufferPerStream: 65535, MaxReceiveBufferPerConnection: 65535, MaxReadFrameSize: 16384}
	})
	tr := newTransport(t, ts.Certificate())
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := make([]byte, 3<<20)
			fill(body, uint64(i))
			sum := sha256.Sum256(body)
			want := fmt.Sprintf("%d %x", len(body), sum)
			req, _ := http.NewRequest(http.MethodPost, ts.URL, bytes.NewReader(body))
			r := await(t, startAsync(tr, req))
			if r.err != nil {
				t.Error(r.err)
				return
			}
			defer r.resp.Body.Close()
			got, _ := io.ReadAll(r.resp.Body)
			if string(got) != want {
				t.Errorf("server got %q, want %q", got, want)
			}
		}()
	}
	wg.Wait()
}

func deterministic(n int) []byte {
	b := make([]byte, n)
	fill(b, 7)
	return b
}

// fill writes seeded pseudo-random bytes into b.
func fill(b []byte, seed uint64) {
	r := rand.NewChaCha8([32]byte{byte(seed)})
	r.Read(b)
}

func TestLargeResponseBody(t *testing.T) {
	payload := deterministic(10 << 20)
	ts := newH2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(payload)
	}))
	tr := newTransport(t, ts.Certificate())
	req, _ := http.NewRequest(http.MethodGet, ts.URL, nil)
	r := await(t, startAsync(tr, req))
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.resp.Body.Close()
	got, err := io.ReadAll(r.resp.Body)
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("got %d bytes (equal %v), err %v", len(got), bytes.Equal(got, payload), err)
	}
}

// A reader that does not read stops the server after about one stream window:
// window is given back only as the body is read.
func TestSlowReaderBoundsBuffering(t *testing.T) {
	var written atomic.Int64
	const total = 10 << 20
	ts := newH2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 16<<10)
		for written.Load() < total {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			written.Add(int64(len(chunk)))
		}
	}))
	tr := newTransport(t, ts.Certificate())
	req, _ := http.NewRequest(http.MethodGet, ts.URL, nil)
	r := await(t, startAsync(tr, req))
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.resp.Body.Close()
	last := int64(-1)
	for stable := 0; stable < 5; {
		time.Sleep(50 * time.Millisecond)
		if w := written.Load(); w == last {
			stable++
		} else {
			last, stable = w, 0
		}
	}
	if last > streamRecvWindow+256<<10 {
		t.Fatalf("server wrote %d bytes to an unread body; want about one stream window (%d)", last, streamRecvWindow)
	}
	n, err := io.Copy(io.Discard, r.resp.Body)
	if err != nil || n != total {
		t.Fatalf("read %d, %v", n, err)
	}
	t.Logf("unread body stalled the server at %d bytes", last)
}

// 1,000 requests at once against a server allowing 100 streams a connection:
// the transport opens more connections and never exceeds the limit.
func TestConcurrencyLimitOpensConnections(t *testing.T) {
	var mu sync.Mutex
	active := map[string]int{}
	peakPerConn, peakTotal, total := 0, 0, 0
	ts := newH2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		active[r.RemoteAddr]++
		total++
		peakPerConn = max(peakPerConn, active[r.RemoteAddr])
		peakTotal = max(peakTotal, total)
		mu.Unlock()
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		active[r.RemoteAddr]--
		total--
		mu.Unlock()
		io.WriteString(w, r.URL.Query().Get("i"))
	}), func(ts *httptest.Server) {
		ts.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 100}
	})
	tr := newTransport(t, ts.Certificate())
	const n = 1000
	results := make(chan error, n)
	for i := range n {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+"/?i="+strconv.Itoa(i), nil)
		want := strconv.Itoa(i)
		tr.Start(req, func(resp *http.Response, err error) {
			if err != nil {
				results <- err
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err == nil && string(b) != want {
				err = fmt.Errorf("request %s got %q", want, b)
			}
			results <- err
		})
	}
	for range n {
		select {
		case err := <-results:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("requests did not complete")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("connections used: %d, peak streams per conn %d, peak total %d", len(active), peakPerConn, peakTotal)
	// The streams in flight at the peak needed at least peakTotal/100 connections. (How
	// high the peak goes depends on how fast the requests are sent against how fast
	// they end: on a loaded machine 9 connections carried a peak of 488.)
	if peakPerConn > 100 || peakTotal <= 100 || len(active) < (peakTotal+99)/100 {
		t.Fatalf("per-conn peak %d (limit 100), total peak %d, conns %d", peakPerConn, peakTotal, len(active))
	}
}

// Body.Read hands over each DATA frame as it arrives: the server waits for the
// client to have seen the first event before it writes the last.
func TestStreamingResponse(t *testing.T) {
	firstSeen := make(chan struct{})
	var lateFirst atomic.Bool
	ts := newH2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-firstSeen:
		case <-time.After(5 * time.Second):
			lateFirst.Store(true)
		}
		time.Sleep(20 * time.Millisecond)
		io.WriteString(w, "data: 2\n\n")
	}))
	tr := newTransport(t, ts.Certificate())
	req, _ := http.NewRequest(http.MethodGet, ts.URL, nil)
	r := await(t, startAsync(tr, req))
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.resp.Body.Close()
	br := bufio.NewReader(r.resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "data: 1\n" {
		t.Fatalf("first event %q, %v", line, err)
	}
	close(firstSeen)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "\ndata: 2\n\n" {
		t.Fatalf("rest %q, %v", rest, err)
	}
	if lateFirst.Load() {
		t.Fatal("the first event reached the client only after the last was written")
	}
}

// holdServer's handler signals started, then waits for its request context
// to end and signals that.
func holdServer(t *testing.T, writeFirst bool) (ts *httptest.Server, started, ended chan struct{}) {
	started, ended = make(chan struct{}, 10), make(chan struct{}, 10)
	ts = newH2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if writeFirst {
			io.WriteString(w, "part1")
			w.(http.Flusher).Flush()
		}
		started <- struct{}{}
		<-r.Context().Done()
		ended <- struct{}{}
	}))
	return ts, started, ended
}

func recvWithin(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not happen", what)
	}
}

func TestCancelBeforeHeaders(t *testing.T) {
	ts, started, ended := holdServer(t, false)
	tr := newTransport(t, ts.Certificate())
	ctx, cancel := context.WithCancel(context.Background())
	ch := startAsync(tr, ctxRequest(t, ctx, ts.URL))
	recvWithin(t, started, "handler start")
	cancel()
	if r := await(t, ch); !errors.Is(r.err, context.Canceled) || r.resp != nil {
		t.Fatalf("got %v, %v; want context.Canceled", r.resp, r.err)
	}
	recvWithin(t, ended, "server request context end")
	waitFor(t, "stream slot freed", func() bool { _, s := tr.connStats(); return s == 0 })
}

func TestDeadlineBeforeHeaders(t *testing.T) {
	ts, _, ended := holdServer(t, false)
	tr := newTransport(t, ts.Certificate())
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	r := await(t, startAsync(tr, ctxRequest(t, ctx, ts.URL)))
	if !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("got %v; want context.DeadlineExceeded", r.err)
	}
	recvWithin(t, ended, "server request context end")
}

func TestCancelDuringBody(t *testing.T) {
	ts, started, ended := holdServer(t, true)
	tr := newTransport(t, ts.Certificate())
	ctx, cancel := context.WithCancel(context.Background())
	r := await(t, startAsync(tr, ctxRequest(t, ctx, ts.URL)))
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.resp.Body.Close()
	buf := make([]byte, 5)
	if _, err := io.ReadFull(r.resp.Body, buf); err != nil || string(buf) != "part1" {
		t.Fatalf("first part %q, %v", buf, err)
	}
	recvWithin(t, started, "handler start")
	readErr := make(chan error, 1)
	go func() { _, err := r.resp.Body.Read(buf); readErr <- err }()
	time.Sleep(50 * time.Millisecond) // let the Read block first
	cancel()
	select {
	case err := <-readErr:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Read returned %v; want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read did not return after cancel")
	}
	recvWithin(t, ended, "server request context end")
}

func TestBodyCloseEarlyResetsStream(t *testing.T) {
	ended := make(chan struct{}, 1)
	ts := newH2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/small" {
			io.WriteString(w, "ok")
			return
		}
		chunk := make([]byte, 8<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				break
			}
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done()
		ended <- struct{}{}
	}))
	tr := newTransport(t, ts.Certificate())
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/endless", nil)
	r := await(t, startAsync(tr, req))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if _, err := io.ReadFull(r.resp.Body, make([]byte, 100<<10)); err != nil {
		t.Fatal(err)
	}
	r.resp.Body.Close()
	if _, err := r.resp.Body.Read(make([]byte, 1)); !errors.Is(err, errBodyClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
	recvWithin(t, ended, "server request context end")
	waitFor(t, "stream slot freed", func() bool { _, s := tr.connStats(); return s == 0 })
	if got := mustGet(t, tr, ts.URL+"/small"); got != "ok" {
		t.Fatalf("next request got %q", got)
	}
	if conns, _ := tr.connStats(); conns != 1 {
		t.Fatalf("%d connections; the reset should not have cost the connection", conns)
	}
}

// The first connection's server takes two streams, answers the first and
// sends GOAWAY naming it as the last processed; the second request must be
// sent again, transparently, on a new connection (Go's real server).
func TestGoAwayRetriesUnprocessedStreams(t *testing.T) {
	h2srv := &http2.Server{}
	var conns atomic.Int32
	ts := newH2Server(t, http.NotFoundHandler(), func(ts *httptest.Server) {
		real := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			io.WriteString(w, "real server got "+string(b))
		})
		ts.Config.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){
			"h2": func(s *http.Server, c *tls.Conn, _ http.Handler) {
				if conns.Add(1) > 1 {
					h2srv.ServeConn(c, &http2.ServeConnOpts{Handler: real, BaseConfig: s})
					return
				}
				serveRawConn(c, nil, func(rc *rawConn) {
					var ids []uint32
					for len(ids) < 2 {
						f, err := rc.readFrame()
						if err != nil {
							return
						}
						switch f := f.(type) {
						case *http2.MetaHeadersFrame:
							ids = append(ids, f.StreamID)
						}
					}
					rc.write(func() error { return rc.fr.WriteGoAway(ids[0], http2.ErrCodeNo, nil) })
					rc.respond(ids[0], "goaway conn")
					for { // until the client closes the drained connection
						if _, err := rc.fr.ReadFrame(); err != nil {
							return
						}
					}
				})
			},
		}
	})
	tr := newTransport(t, ts.Certificate())
	a := startAsync(tr, ctxRequest(t, context.Background(), ts.URL+"/a"))
	// b's body went out with its HEADERS, so the retry replays it via GetBody.
	reqB, _ := http.NewRequest(http.MethodPost, ts.URL+"/b", strings.NewReader("payload-b"))
	b := startAsync(tr, reqB)
	var got []string
	for _, ch := range []<-chan result{a, b} {
		r := await(t, ch)
		if r.err != nil {
			t.Fatal(r.err)
		}
		body, _ := io.ReadAll(r.resp.Body)
		r.resp.Body.Close()
		got = append(got, string(body))
	}
	if got[0] != "goaway conn" || got[1] != "real server got payload-b" || conns.Load() != 2 {
		t.Fatalf("bodies %q over %d connections", got, conns.Load())
	}
	waitFor(t, "GOAWAY connection closed", func() bool { c, _ := tr.connStats(); return c == 1 })
}

// Go's server, shutting down, sends GOAWAY: the request in flight completes,
// and the connection takes no new stream (the next one must dial, and fails
// because the listener is closed).
func TestServerShutdownDrainsConnection(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	ts := newH2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
		io.WriteString(w, "finished")
	}))
	tr := newTransport(t, ts.Certificate())
	inflight := startAsync(tr, ctxRequest(t, context.Background(), ts.URL))
	recvWithin(t, started, "handler start")
	shut := make(chan error, 1)
	go func() { shut <- ts.Config.Shutdown(context.Background()) }()
	waitFor(t, "GOAWAY received", func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		for _, p := range tr.pools {
			for _, c := range p.conns {
				return c.goAway
			}
		}
		return false
	})
	if r := await(t, startAsync(tr, ctxRequest(t, context.Background(), ts.URL))); r.err == nil {
		t.Fatal("a new request went onto the draining connection")
	}
	close(release)
	r := await(t, inflight)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if b, err := io.ReadAll(r.resp.Body); err != nil || string(b) != "finished" {
		t.Fatalf("in-flight request got %q, %v", b, err)
	}
	r.resp.Body.Close()
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	waitFor(t, "drained connection closed", func() bool { c, _ := tr.connStats(); return c == 0 })
}

func TestConnectionLossFailsPendingStreams(t *testing.T) {
	var started atomic.Int32
	ts := newH2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			io.WriteString(w, "ok")
			return
		}
		if r.URL.Path == "/stream" {
			io.WriteString(w, "part")
			w.(http.Flusher).Flush()
		}
		started.Add(1)
		<-r.Context().Done()
	}))
	tr := newTransport(t, ts.Certificate())
	var pending []<-chan result
	for range 5 {
		pending = append(pending, startAsync(tr, ctxRequest(t, context.Background(), ts.URL+"/hold")))
	}
	sr := await(t, startAsync(tr, ctxRequest(t, context.Background(), ts.URL+"/stream")))
	if sr.err != nil {
		t.Fatal(sr.err)
	}
	defer sr.resp.Body.Close()
	waitFor(t, "all handlers running", func() bool { return started.Load() == 6 })
	ts.CloseClientConnections()
	for _, ch := range pending {
		if r := await(t, ch); r.err == nil {
			t.Fatal("a pending request survived the connection's loss")
		}
	}
	_, err := io.ReadAll(sr.resp.Body)
	if err == nil {
		t.Fatal("the streaming body ended cleanly although its connection was lost")
	}
	if got := mustGet(t, tr, ts.URL+"/ok"); got != "ok" {
		t.Fatalf("request after the loss got %q", got)
	}
}

// rawPingServer answers the client's first request after delay; it answers
// PINGs only if answer is set, and counts them.
func rawPingServer(t *testing.T, answer bool, delay time.Duration, pings *atomic.Int32) *httptest.Server {
	return newRawServer(t, func(_ int, rc *rawConn) {
		for {
			f, err := rc.readFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.PingFrame:
				if !f.IsAck() {
					pings.Add(1)
					if answer {
						rc.write(func() error { return rc.fr.WritePing(true, f.Data) })
					}
				}
			case *http2.MetaHeadersFrame:
				id := f.StreamID
				time.AfterFunc(delay, func() { rc.respond(id, "late") })
			}
		}
	})
}

func TestPingKeepsAnsweringConnectionAlive(t *testing.T) {
	var pings atomic.Int32
	ts := rawPingServer(t, true, 600*time.Millisecond, &pings)
	tr := newTransport(t, ts.Certificate())
	tr.ReadIdleTimeout, tr.PingTimeout = 50*time.Millisecond, 200*time.Millisecond
	if got := mustGet(t, tr, ts.URL); got != "late" {
		t.Fatalf("got %q", got)
	}
	if pings.Load() < 3 {
		t.Fatalf("%d PINGs in 600ms of silence; want one per ~50ms", pings.Load())
	}
}

func TestUnansweredPingClosesConnection(t *testing.T) {
	var pings atomic.Int32
	ts := rawPingServer(t, false, time.Hour, &pings)
	tr := newTransport(t, ts.Certificate())
	tr.ReadIdleTimeout, tr.PingTimeout = 50*time.Millisecond, 100*time.Millisecond
	r := await(t, startAsync(tr, ctxRequest(t, context.Background(), ts.URL)))
	if r.err == nil || !strings.Contains(r.err.Error(), "PING") {
		t.Fatalf("got %v; want a PING timeout", r.err)
	}
	if c, _ := tr.connStats(); c != 0 || pings.Load() != 1 {
		t.Fatalf("%d conns left, %d pings", c, pings.Load())
	}
}

func TestIdleConnectionClosed(t *testing.T) {
	var closed atomic.Int32
	ts := newH2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
		func(ts *httptest.Server) {
			ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateClosed {
					closed.Add(1)
				}
			}
		})
	tr := newTransport(t, ts.Certificate())
	tr.IdleConnTimeout = 100 * time.Millisecond
	mustGet(t, tr, ts.URL)
	waitFor(t, "idle connection closed", func() bool { c, _ := tr.connStats(); return c == 0 && closed.Load() == 1 })
}

func TestFallbackPlainHTTP(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Proto) }))
	defer ts.Close()
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	if got := mustGet(t, tr, ts.URL); got != "HTTP/1.1" {
		t.Fatalf("got %q", got)
	}
}

func TestFallbackServerWithoutH2(t *testing.T) {
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Proto) }))
	defer ts.Close()
	tr := newTransport(t, ts.Certificate())
	for range 2 {
		if got := mustGet(t, tr, ts.URL); got != "HTTP/1.1" {
			t.Fatalf("got %q", got)
		}
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if p := tr.pools[authorityKey(mustURL(t, ts.URL))]; p == nil || !p.h1Until.After(time.Now()) || len(p.conns) != 0 {
		t.Fatal("the authority was not remembered as HTTP/1")
	}
}

func TestNoGoroutinesLeftAfterCloseIdle(t *testing.T) {
	base := runtime.NumGoroutine()
	func() {
		ts := newH2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
		tr := newTransport(t, ts.Certificate())
		var wg sync.WaitGroup
		for range 50 {
			wg.Add(1)
			go func() { defer wg.Done(); mustGet(t, tr, ts.URL) }()
		}
		wg.Wait()
		if n := runtime.NumGoroutine(); n <= base {
			t.Fatalf("no goroutines while connected (%d <= %d)", n, base)
		}
		tr.CloseIdleConnections()
		ts.Close()
	}()
	waitFor(t, fmt.Sprintf("goroutines back to %d", base), func() bool { return runtime.NumGoroutine() <= base })
}

func TestRequestBodyLimit(t *testing.T) {
	ts := newH2Server(t, http.NotFoundHandler())
	tr := newTransport(t, ts.Certificate())
	tr.MaxBodyBytes = 10
	req, _ := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(strings.Repeat("x", 11)))
	if r := await(t, startAsync(tr, req)); !errors.Is(r.err, errBodyTooLarge) {
		t.Fatalf("got %v", r.err)
	}
}

// Headers over MaxResponseHeaderBytes fail that request only. (x/net's Framer
// drops the whole connection instead when one value exceeds the limit or the
// block is over twice it.)
func TestResponseHeaderLimit(t *testing.T) {
	ts := newH2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			for i := range 20 { // each value below the limit, their sum above
				w.Header().Set("X-Big-"+strconv.Itoa(i), strings.Repeat("x", 80))
			}
		}
		io.WriteString(w, "ok")
	}))
	tr := newTransport(t, ts.Certificate())
	tr.MaxResponseHeaderBytes = 1000
	r := await(t, startAsync(tr, ctxRequest(t, context.Background(), ts.URL+"/big")))
	if r.err == nil || !strings.Contains(r.err.Error(), "too large") {
		t.Fatalf("got %v; want a header size error", r.err)
	}
	if got := mustGet(t, tr, ts.URL+"/small"); got != "ok" {
		t.Fatalf("next request got %q", got)
	}
	if c, _ := tr.connStats(); c != 1 {
		t.Fatalf("%d connections; the oversized headers should have cost only their stream", c)
	}
}

// Many requests, cancelled or abandoned at random points against a server
// limited to 20 streams a connection: every done is called exactly once, and
// afterwards no stream is left seated and no goroutine is left running.
func TestRandomCancellationLeavesNoState(t *testing.T) {
	base := runtime.NumGoroutine()
	ts := newH2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		io.Copy(io.Discard, r.Body)
		for i := 0; i < n; i++ {
			if _, err := w.Write(make([]byte, 1000)); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			time.Sleep(time.Millisecond)
		}
	}), func(ts *httptest.Server) {
		ts.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 20}
	})
	tr := newTransport(t, ts.Certificate())
	const n = 400
	var calls, failed atomic.Int32
	var wg sync.WaitGroup
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		ctx, cancel := context.WithCancel(context.Background())
		url := fmt.Sprintf("%s/?n=%d", ts.URL, rng.IntN(30))
		var body io.Reader
		if i%3 == 0 {
			body = bytes.NewReader(make([]byte, rng.IntN(200<<10)))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
		cancelAfter := time.Duration(rng.IntN(40)) * time.Millisecond
		mode := rng.IntN(3) // 0: read all, 1: close early, 2: cancel
		wg.Add(1)
		var once atomic.Bool
		tr.Start(req, func(resp *http.Response, err error) {
			defer wg.Done()
			defer cancel()
			calls.Add(1)
			if !once.CompareAndSwap(false, true) {
				t.Error("done called twice")
			}
			if err != nil {
				failed.Add(1)
				if !errors.Is(err, context.Canceled) {
					t.Errorf("request failed with %v; only cancellation was expected", err)
				}
				return
			}
			defer resp.Body.Close()
			if mode == 1 {
				resp.Body.Read(make([]byte, 10))
				return
			}
			if _, err := io.Copy(io.Discard, resp.Body); err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("body read failed with %v; only cancellation was expected", err)
			}
		})
		if mode == 2 {
			time.AfterFunc(cancelAfter, cancel)
		}
	}
	wg.Wait()
	if calls.Load() != n {
		t.Fatalf("done called %d times for %d requests", calls.Load(), n)
	}
	t.Logf("%d of %d requests failed (cancelled before their headers)", failed.Load(), n)
	waitFor(t, "no stream left", func() bool { _, s := tr.connStats(); return s == 0 })
	tr.CloseIdleConnections()
	ts.Close()
	waitFor(t, "goroutines back to the baseline", func() bool { return runtime.NumGoroutine() <= base })
}

// The server starts with a zero stream window: HEADERS go out, the body waits
// (no goroutine) until a SETTINGS_INITIAL_WINDOW_SIZE change opens the open
// stream's window; the 65,535-byte connection window then needs WINDOW_UPDATEs.
func TestInitialWindowChangeReleasesBody(t *testing.T) {
	const size = 200 << 10
	gotData := make(chan int, 1)
	ts := newRawServerWith(t, []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: 0}}, func(_ int, rc *rawConn) {
		var id uint32
		received, early := 0, 0
		opened := false
		rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			if id != 0 && !opened {
				// Give a client that ignores the zero window time to misbehave.
				rc.c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			}
			f, err := rc.readFrame()
			if ne, ok := err.(interface{ Timeout() bool }); ok && ne.Timeout() && !opened {
				opened = true
				rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
				rc.write(func() error {
					return rc.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
				})
				continue
			}
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				id = f.StreamID
			case *http2.DataFrame:
				if !opened {
					early += len(f.Data())
				}
				received += len(f.Data())
				if n := uint32(len(f.Data())); n > 0 {
					rc.write(func() error { return rc.fr.WriteWindowUpdate(0, n) })
				}
				if f.StreamEnded() {
					gotData <- early
					rc.respond(id, strconv.Itoa(received))
				}
			}
		}
	})
	tr := newTransport(t, ts.Certificate())
	req, _ := http.NewRequest(http.MethodPost, ts.URL, bytes.NewReader(make([]byte, size)))
	r := await(t, startAsync(tr, req))
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.resp.Body.Close()
	b, _ := io.ReadAll(r.resp.Body)
	if early := <-gotData; early != 0 || string(b) != strconv.Itoa(size) {
		t.Fatalf("server got %s bytes, %d of them before the window opened", b, early)
	}
}

// A request waiting for a connection (here: the server delays its SETTINGS)
// is cancelled there: done gets the context error at once, and the server
// never sees it.
func TestCancelWhileWaitingForConnection(t *testing.T) {
	gate := make(chan struct{})
	var served atomic.Int32
	h2srv := &http2.Server{}
	ts := newH2Server(t, http.NotFoundHandler(), func(ts *httptest.Server) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			served.Add(1)
			io.WriteString(w, r.URL.Path)
		})
		ts.Config.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){
			"h2": func(s *http.Server, c *tls.Conn, _ http.Handler) {
				<-gate
				h2srv.ServeConn(c, &http2.ServeConnOpts{Handler: h, BaseConfig: s})
			},
		}
	})
	tr := newTransport(t, ts.Certificate())
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := startAsync(tr, ctxRequest(t, ctx, ts.URL+"/cancelled"))
	kept := startAsync(tr, ctxRequest(t, context.Background(), ts.URL+"/kept"))
	cancel()
	if r := await(t, cancelled); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("got %v; want context.Canceled", r.err)
	}
	close(gate)
	r := await(t, kept)
	if r.err != nil {
		t.Fatal(r.err)
	}
	b, _ := io.ReadAll(r.resp.Body)
	r.resp.Body.Close()
	if string(b) != "/kept" || served.Load() != 1 {
		t.Fatalf("kept request got %q; server served %d requests", b, served.Load())
	}
}
