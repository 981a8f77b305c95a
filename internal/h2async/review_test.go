package h2async

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// onlyConn returns the transport's single connection to ts.
func onlyConn(t *testing.T, tr *Transport, ts *httptest.Server) *conn {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	p := tr.pools[authorityKey(mustURL(t, ts.URL))]
	if p == nil || len(p.conns) != 1 {
		t.Fatal("want exactly one connection")
	}
	return p.conns[0]
}

// locked reads a connection's state under the transport's lock.
func locked[T any](tr *Transport, f func() T) T {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return f()
}

// A GOAWAY read while the writer is busy writing a batch requeues streams
// whose HEADERS are in that batch. The writer must still write them under the
// ids they were given on this connection: the requeue zeroes s.id (or another
// connection gives it a new one), and writing that id killed the connection
// and with it the stream the server had accepted and was about to answer.
func TestGoAwayDuringHeaderWriteKeepsAcceptedStream(t *testing.T) {
	h2srv := &http2.Server{}
	var conns atomic.Int32
	readC, sendGoAway, resume := make(chan struct{}), make(chan struct{}), make(chan struct{})
	ts := newH2Server(t, http.NotFoundHandler(), func(ts *httptest.Server) {
		real := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "second conn") })
		ts.Config.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){
			"h2": func(s *http.Server, c *tls.Conn, _ http.Handler) {
				if conns.Add(1) > 1 {
					h2srv.ServeConn(c, &http2.ServeConnOpts{Handler: real, BaseConfig: s})
					return
				}
				if tc, ok := c.NetConn().(*net.TCPConn); ok {
					tc.SetReadBuffer(8 << 10)
				}
				serveRawConn(c, nil, func(rc *rawConn) {
					nextHeaders := func() uint32 {
						for {
							f, err := rc.readFrame()
							if err != nil {
								return 0
							}
							switch f := f.(type) {
							case *http2.MetaHeadersFrame:
								return f.StreamID
							}
						}
					}
					warm := nextHeaders()
					rc.respond(warm, "warm")
					<-readC
					accepted := nextHeaders() // then read nothing: the writer blocks
					<-sendGoAway
					rc.write(func() error { return rc.fr.WriteGoAway(accepted, http2.ErrCodeNo, nil) })
					<-resume
					if tc, ok := c.NetConn().(*net.TCPConn); ok {
						tc.SetReadBuffer(1 << 20) // the rest can go fast
					}
					// Answer only once the blocked batch has arrived whole, so a
					// writer that breaks the connection mid-batch fails the test.
					if nextHeaders() == 0 {
						return
					}
					rc.respond(accepted, "accepted")
					for nextHeaders() != 0 {
					}
				})
			},
		}
	})
	tr := newTransport(t, ts.Certificate())
	if got := mustGet(t, tr, ts.URL+"/warm"); got != "warm" {
		t.Fatalf("warm-up got %q", got)
	}
	c := onlyConn(t, tr, ts)
	c.raw.(*net.TCPConn).SetWriteBuffer(8 << 10)
	bigReq := func(path string) *http.Request {
		req := ctxRequest(t, context.Background(), ts.URL+path)
		req.Header.Set("X-Big", strings.Repeat("x", 128<<10)) // many CONTINUATIONs
		return req
	}
	accepted := startAsync(tr, bigReq("/accepted"))
	waitFor(t, "the first request taken by the writer", func() bool {
		return locked(tr, func() bool { return len(c.headerQ) == 0 && len(c.streams) == 1 })
	})
	time.Sleep(100 * time.Millisecond) // the writer blocks: the server is not reading
	refusedBig := startAsync(tr, bigReq("/refused-big"))
	refused := startAsync(tr, ctxRequest(t, context.Background(), ts.URL+"/refused"))
	if n := locked(tr, func() int { return len(c.headerQ) }); n != 2 {
		t.Fatalf("%d requests queued behind the blocked writer; want 2", n)
	}
	close(readC)
	waitFor(t, "both queued requests taken in one batch", func() bool {
		return locked(tr, func() bool { return len(c.headerQ) == 0 && len(c.streams) == 3 })
	})
	time.Sleep(100 * time.Millisecond) // the writer blocks inside the big HEADERS
	close(sendGoAway)
	waitFor(t, "the requests above the GOAWAY requeued", func() bool {
		return locked(tr, func() bool { return c.reserved == 1 })
	})
	close(resume)
	for name, ch := range map[string]<-chan result{"accepted": accepted, "refused-big": refusedBig, "refused": refused} {
		r := await(t, ch)
		if r.err != nil {
			t.Errorf("%s: %v", name, r.err)
			continue
		}
		b, err := io.ReadAll(r.resp.Body)
		r.resp.Body.Close()
		want := "second conn"
		if name == "accepted" {
			want = "accepted"
		}
		if err != nil || string(b) != want {
			t.Errorf("%s: body %q, %v; want %q", name, b, err, want)
		}
	}
}

// Readers that stop reading hold at most their stream windows. The
// connection window must cover every stream's window, or a few slow readers
// (here five, each with a full 1 MiB stream window buffered) stall every other
// stream on the connection until they read.
func TestSlowReadersDoNotStallOtherStreams(t *testing.T) {
	big := deterministic(3 << 20)
	ts := newH2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fast" {
			io.WriteString(w, "fast")
			return
		}
		w.Write(big)
	}))
	t.Cleanup(ts.CloseClientConnections) // a failure leaves handlers blocked in Write
	tr := newTransport(t, ts.Certificate())
	mustGet(t, tr, ts.URL+"/warm")
	c := onlyConn(t, tr, ts)
	var slow []*http.Response
	for range 5 {
		r := await(t, startAsync(tr, ctxRequest(t, context.Background(), ts.URL+"/slow")))
		if r.err != nil {
			t.Fatal(r.err)
		}
		slow = append(slow, r.resp)
	}
	waitFor(t, "the slow streams' windows (or the connection's) filled", func() bool {
		return locked(tr, func() bool {
			if c.recvWin <= 0 {
				return true
			}
			for _, s := range c.streams {
				if s.recvWin > 0 {
					return false
				}
			}
			return len(c.streams) == 5
		})
	})
	fast := await(t, startAsync(tr, ctxRequest(t, context.Background(), ts.URL+"/fast")))
	if fast.err != nil {
		t.Fatal(fast.err)
	}
	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(fast.resp.Body)
		got <- string(b)
	}()
	select {
	case b := <-got:
		if b != "fast" {
			t.Fatalf("fast body %q", b)
		}
	case <-time.After(3 * time.Second):
		fast.resp.Body.Close()
		t.Fatal("a fast stream stalled behind slow readers' unread bytes")
	}
	fast.resp.Body.Close()
	for i, r := range slow {
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil || !bytes.Equal(b, big) {
			t.Fatalf("slow body %d: %d bytes, %v", i, len(b), err)
		}
	}
}

// stressDone counts done calls per request and fails on a second one.
type stressDone struct {
	t     *testing.T
	wg    sync.WaitGroup
	calls atomic.Int64
}

func (sd *stressDone) wrap(f func(*http.Response, error)) func(*http.Response, error) {
	sd.wg.Add(1)
	var once atomic.Bool
	return func(resp *http.Response, err error) {
		defer sd.wg.Done()
		sd.calls.Add(1)
		if !once.CompareAndSwap(false, true) {
			sd.t.Error("done called twice")
			return
		}
		f(resp, err)
	}
}

func (sd *stressDone) wait(n int) {
	sd.t.Helper()
	ch := make(chan struct{})
	go func() { sd.wg.Wait(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(15 * time.Second):
		sd.t.Fatalf("only %d of %d done calls within 15s", sd.calls.Load(), n)
	}
	if got := sd.calls.Load(); got != int64(n) {
		sd.t.Fatalf("done called %d times for %d requests", got, n)
	}
}

// checkBody reads a response whose body must be want or end in a clean error.
func checkBody(t *testing.T, resp *http.Response, want []byte) (complete bool) {
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		if !bytes.HasPrefix(want, b) {
			t.Errorf("partial body (%d bytes) is not a prefix of the expected one", len(b))
		}
		return false
	}
	if !bytes.Equal(b, want) {
		t.Errorf("body of %d bytes differs from the expected %d", len(b), len(want))
	}
	return true
}

// Requests with random cancel timing, handlers that abort mid-body, and the
// server dropping every client connection now and then: every done is called
// once, every body is byte-exact or ends in an error, and nothing is left.
//
// The connections are dropped at every 40th request the server starts, six
// times, not on a timer: on a loaded machine a 60 ms timer dropped every
// connection before its TLS handshake ended, and no request could complete.
func TestStressCancelAbortAndConnectionDrops(t *testing.T) {
	base := runtime.NumGoroutine()
	payload := deterministic(40 << 10)
	var served atomic.Int32
	var server atomic.Pointer[httptest.Server]
	ts := newH2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := served.Add(1); n%40 == 0 && n <= 6*40 {
			go server.Load().CloseClientConnections()
		}
		io.Copy(io.Discard, r.Body)
		abort := r.URL.Query().Get("abort") == "1"
		for off := 0; off < len(payload); off += 8 << 10 {
			if abort && off >= 16<<10 {
				panic(http.ErrAbortHandler)
			}
			if _, err := w.Write(payload[off : off+8<<10]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}), func(ts *httptest.Server) {
		ts.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 50}
		ts.Config.ErrorLog = quietLog()
	})
	server.Store(ts)
	tr := newTransport(t, ts.Certificate())
	const n = 1500
	sd := &stressDone{t: t}
	var complete, failed atomic.Int32
	var errMu sync.Mutex
	errs := map[string]int{}
	for i := range n {
		ctx, cancel := context.WithCancel(context.Background())
		url := ts.URL + "/?abort=" + fmt.Sprint(i%7/6)
		var body io.Reader
		if i%4 == 0 {
			body = bytes.NewReader(payload[:i%3*20000])
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
		tr.Start(req, sd.wrap(func(resp *http.Response, err error) {
			defer cancel()
			if err != nil {
				failed.Add(1)
				errMu.Lock()
				errs[strings.Split(err.Error(), ":")[0]+": "+err.Error()[max(0, len(err.Error())-40):]]++
				errMu.Unlock()
				return
			}
			if checkBody(t, resp, payload) {
				complete.Add(1)
			} else {
				failed.Add(1)
			}
		}))
		switch i % 5 {
		case 0:
			cancel()
		case 1:
			time.AfterFunc(time.Duration(i%13)*time.Millisecond, cancel)
		}
		if i%50 == 49 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	sd.wait(n)
	t.Logf("%d complete, %d failed cleanly: %v", complete.Load(), failed.Load(), errs)
	if complete.Load() == 0 {
		t.Fatal("no request completed")
	}
	// The transport still works after all that.
	if got := mustGet(t, tr, ts.URL+"/?abort=0"); got != string(payload) {
		t.Fatal("request after the stress got a wrong body")
	}
	waitFor(t, "no stream left", func() bool { _, s := tr.connStats(); return s == 0 })
	tr.CloseIdleConnections()
	ts.Close()
	waitFor(t, "goroutines back to the baseline", func() bool { return runtime.NumGoroutine() <= base })
}

// A raw server that answers every request and sends GOAWAY(last = the newest
// stream) after every few of them, then keeps serving the streams it accepted:
// requests flowing meanwhile are all answered exactly once, on this or a new
// connection.
func TestStressRepeatedGoAway(t *testing.T) {
	base := runtime.NumGoroutine()
	ts := newRawServer(t, func(_ int, rc *rawConn) {
		seen := 0
		for {
			f, err := rc.readFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				seen++
				id := f.StreamID
				if seen%40 == 0 {
					rc.write(func() error { return rc.fr.WriteGoAway(id, http2.ErrCodeNo, nil) })
				}
				go func() {
					time.Sleep(time.Millisecond)
					rc.respond(id, fmt.Sprint("stream ", id))
				}()
			}
		}
	})
	tr := newTransport(t, ts.Certificate())
	const n = 400
	sd := &stressDone{t: t}
	var okCount atomic.Int32
	for i := range n {
		req, _ := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(fmt.Sprint("body ", i)))
		tr.Start(req, sd.wrap(func(resp *http.Response, err error) {
			if err != nil {
				if !errors.Is(err, errTooManyTries) {
					t.Errorf("request %d: %v", i, err)
				}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil || !strings.HasPrefix(string(b), "stream ") {
				t.Errorf("request %d: body %q, %v", i, b, err)
				return
			}
			okCount.Add(1)
		}))
		if i%10 == 9 {
			time.Sleep(2 * time.Millisecond)
		}
	}
	sd.wait(n)
	t.Logf("%d of %d answered", okCount.Load(), n)
	if okCount.Load() < n*9/10 {
		t.Fatalf("only %d of %d answered", okCount.Load(), n)
	}
	waitFor(t, "no stream left", func() bool { _, s := tr.connStats(); return s == 0 })
	tr.CloseIdleConnections()
	ts.Close()
	waitFor(t, "goroutines back to the baseline", func() bool { return runtime.NumGoroutine() <= base })
}

// A server that stops reading while we send a large body: the writer blocks,
// but the reader and every other stream's Body.Read go on, and WriteTimeout
// closes the connection so every stream ends with an error, not a hang.
func TestStalledPeerWriteTimeoutClosesConnection(t *testing.T) {
	base := runtime.NumGoroutine()
	release := make(chan struct{})
	ts := newRawServerWith(t, []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: 1 << 30}}, func(_ int, rc *rawConn) {
		rc.write(func() error { return rc.fr.WriteWindowUpdate(0, 1<<30) })
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
		// Answer the GET's headers and part of its body, then read nothing more.
		rc.respond(ids[0], "")
		<-release // the client gives up long before
	})
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock) // on failure; runs before the server's Close
	tr := newTransport(t, ts.Certificate())
	tr.WriteTimeout = 500 * time.Millisecond
	get := startAsync(tr, ctxRequest(t, context.Background(), ts.URL+"/get"))
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/post", bytes.NewReader(make([]byte, 32<<20)))
	post := startAsync(tr, req)
	start := time.Now()
	r := await(t, post)
	if r.err == nil {
		r.resp.Body.Close()
		t.Fatal("the POST to a server that stopped reading succeeded")
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("the stalled write failed only after %v", el)
	}
	g := await(t, get)
	if g.err == nil {
		io.ReadAll(g.resp.Body)
		g.resp.Body.Close()
	}
	waitFor(t, "no connection left", func() bool { c, _ := tr.connStats(); return c == 0 })
	unblock()
	ts.Close()
	waitFor(t, "goroutines back to the baseline", func() bool { return runtime.NumGoroutine() <= base })
}

// Body.Close racing Body.Read (and the context's cancel) on many streams:
// no panic, no hang, reads end with data, EOF or an error, and no stream is
// left seated.
func TestConcurrentBodyCloseAndRead(t *testing.T) {
	payload := deterministic(200 << 10)
	ts := newH2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for off := 0; off < len(payload); off += 4 << 10 {
			if _, err := w.Write(payload[off : off+4<<10]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	tr := newTransport(t, ts.Certificate())
	const n = 200
	sd := &stressDone{t: t}
	for i := range n {
		ctx, cancel := context.WithCancel(context.Background())
		tr.Start(ctxRequest(t, ctx, ts.URL), sd.wrap(func(resp *http.Response, err error) {
			defer cancel()
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			var wg sync.WaitGroup
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					buf := make([]byte, 1000)
					for {
						if _, err := resp.Body.Read(buf); err != nil {
							return
						}
					}
				}()
			}
			time.Sleep(time.Duration(i%5) * time.Millisecond)
			if i%2 == 0 {
				cancel()
			}
			resp.Body.Close()
			wg.Wait()
			if _, err := resp.Body.Read(make([]byte, 1)); err == nil {
				t.Errorf("request %d: Read after Close succeeded", i)
			}
		}))
	}
	sd.wait(n)
	waitFor(t, "no stream left", func() bool { _, s := tr.connStats(); return s == 0 })
}

// quietLog keeps a test server's expected connection errors out of the output.
func quietLog() *log.Logger { return log.New(io.Discard, "", 0) }

// A SETTINGS_INITIAL_WINDOW_SIZE change that grows an open stream's window
// past 2^31-1 is a connection error (RFC 9113 6.9.2): the connection closes
// and the request fails, rather than sending beyond what the peer can count.
func TestInitialWindowOverflowClosesConnection(t *testing.T) {
	ts := newRawServer(t, func(_ int, rc *rawConn) {
		rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			f, err := rc.readFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				id := f.StreamID
				rc.write(func() error {
					if err := rc.fr.WriteWindowUpdate(id, maxWindow-(65535-10)); err != nil { // to exactly 2^31-1
						return err
					}
					return rc.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 65536})
				})
			}
		}
	})
	tr := newTransport(t, ts.Certificate())
	req, _ := http.NewRequest(http.MethodPost, ts.URL, bytes.NewReader(make([]byte, 10)))
	r := await(t, startAsync(tr, req))
	if r.err == nil {
		r.resp.Body.Close()
		t.Fatal("request succeeded")
	}
	if !strings.Contains(r.err.Error(), "window overflow") {
		t.Fatalf("got %v; want a flow-control window overflow", r.err)
	}
	waitFor(t, "the connection closed", func() bool { c, _ := tr.connStats(); return c == 0 })
}

// A server that sets connections up but lets them carry nothing — closing each right
// after its SETTINGS, or allowing no stream — fails the waiting request after a few
// connections, with an error that says so, instead of dialling again until the
// request's context ends; a usable server afterwards is used at once.
func TestUnusableServerFailsInsteadOfRedialling(t *testing.T) {
	for _, c := range []struct {
		name     string
		settings []http2.Setting
		serve    func(n int, rc *rawConn)
		want     error
		also     string // another error text that is as good
	}{
		{"closed at once", nil, func(int, *rawConn) {}, errClosedAtOnce, "127.0.0.1"},
		{"no stream allowed", []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: 0}}, func(_ int, rc *rawConn) {
			rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
			for {
				if _, err := rc.fr.ReadFrame(); err != nil {
					return
				}
			}
		}, errNoStreams, "\x00"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var conns atomic.Int64
			ts := newRawServerWith(t, c.settings, func(n int, rc *rawConn) {
				conns.Add(1)
				c.serve(n, rc)
			})
			tr := newTransport(t, ts.Certificate())
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			r := await(t, startAsync(tr, ctxRequest(t, ctx, ts.URL)))
			// A connection closed at once may also be noticed after the request was
			// seated on it: it then fails as a lost connection, as fast.
			if r.err == nil || errors.Is(r.err, context.DeadlineExceeded) || !errors.Is(r.err, c.want) && !strings.Contains(r.err.Error(), c.also) {
				t.Fatalf("err %v after %s; want %v", r.err, time.Since(start), c.want)
			}
			if n := conns.Load(); n > maxUnusable+maxParallelDials {
				t.Fatalf("%d connections dialled for one request", n)
			}
		})
	}
}
