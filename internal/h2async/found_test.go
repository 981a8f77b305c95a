package h2async

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
)

// Cases the interop tests found, reproduced with hand-driven servers so they run
// without nginx or node.

// A server that ends every connection with GOAWAY after a few requests (nginx's
// keepalive_requests) while many are in flight: each connection makes progress, so
// every request is answered however often it is turned away. Requests used to fail
// with errTooManyTries after four GOAWAYs.
func TestGoAwayEveryFewRequestsAnswersAll(t *testing.T) {
	var conns atomic.Int32
	ts := newRawServer(t, func(_ int, rc *rawConn) {
		conns.Add(1)
		var served []uint32
		for {
			f, err := rc.readFrame()
			if err != nil {
				return
			}
			h, ok := f.(*http2.MetaHeadersFrame)
			if !ok || len(served) == 2 {
				continue // streams above the GOAWAY's last id are not processed
			}
			served = append(served, h.StreamID)
			if len(served) == 2 {
				rc.write(func() error { return rc.fr.WriteGoAway(h.StreamID, http2.ErrCodeNo, nil) })
			}
			rc.respond(h.StreamID, fmt.Sprint("stream ", h.StreamID))
		}
	})
	tr := newTransport(t, ts.Certificate())
	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(fmt.Sprint("body ", i)))
			r := await(t, startAsync(tr, req))
			if r.err != nil {
				t.Errorf("request %d: %v", i, r.err)
				return
			}
			defer r.resp.Body.Close()
			if b, err := io.ReadAll(r.resp.Body); err != nil || !strings.HasPrefix(string(b), "stream ") {
				t.Errorf("request %d: %q, %v", i, b, err)
			}
		}()
	}
	wg.Wait()
	if c := conns.Load(); c < n/2 {
		t.Fatalf("%d connections for %d requests answered two a connection", c, n)
	}
}

// A GOAWAY that processed nothing (last stream id 0) on every connection still
// fails the request after a few attempts instead of looping.
func TestGoAwayWithoutProgressFails(t *testing.T) {
	ts := newRawServer(t, func(_ int, rc *rawConn) {
		for {
			f, err := rc.readFrame()
			if err != nil {
				return
			}
			if _, ok := f.(*http2.MetaHeadersFrame); ok {
				rc.write(func() error { return rc.fr.WriteGoAway(0, http2.ErrCodeNo, nil) })
			}
		}
	})
	tr := newTransport(t, ts.Certificate())
	req, _ := http.NewRequest(http.MethodGet, ts.URL, nil)
	if r := await(t, startAsync(tr, req)); r.err == nil {
		r.resp.Body.Close()
		t.Fatal("a request no connection processed succeeded")
	}
}

// A PUSH_PROMISE although we sent SETTINGS_ENABLE_PUSH=0 is a connection error
// (RFC 9113 8.4): the request on it fails, and the next one gets a new connection.
func TestPushPromiseFailsConnection(t *testing.T) {
	var conns atomic.Int32
	ts := newRawServer(t, func(_ int, rc *rawConn) {
		n := conns.Add(1)
		for {
			f, err := rc.readFrame()
			if err != nil {
				return
			}
			h, ok := f.(*http2.MetaHeadersFrame)
			if !ok {
				continue
			}
			if n == 1 {
				rc.write(func() error {
					return rc.fr.WritePushPromise(http2.PushPromiseParam{StreamID: h.StreamID, PromiseID: 2, BlockFragment: []byte{0x82}, EndHeaders: true})
				})
				continue
			}
			rc.respond(h.StreamID, "ok")
		}
	})
	tr := newTransport(t, ts.Certificate())
	req, _ := http.NewRequest(http.MethodGet, ts.URL, nil)
	if r := await(t, startAsync(tr, req)); r.err == nil {
		r.resp.Body.Close()
		t.Fatal("the request on a connection that pushed succeeded")
	}
	if got := mustGet(t, tr, ts.URL); got != "ok" || conns.Load() != 2 {
		t.Fatalf("next request: %q over %d connections", got, conns.Load())
	}
}

// The data that arrived before the server reset the stream is read before the
// reset's error, as net/http does: a streamed answer cut by the server keeps its
// last events. (Node resets slow GET responses with RST_STREAM(NO_ERROR) after
// their last DATA; the bytes used to be dropped.)
func TestDataBeforeResetIsRead(t *testing.T) {
	ts := newRawServer(t, func(_ int, rc *rawConn) {
		for {
			f, err := rc.readFrame()
			if err != nil {
				return
			}
			h, ok := f.(*http2.MetaHeadersFrame)
			if !ok {
				continue
			}
			rc.write(func() error {
				if err := rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: h.StreamID, BlockFragment: []byte{0x88}, EndHeaders: true}); err != nil { // :status 200
					return err
				}
				if err := rc.fr.WriteData(h.StreamID, false, []byte("data: last event\n\n")); err != nil {
					return err
				}
				return rc.fr.WriteRSTStream(h.StreamID, http2.ErrCodeInternal)
			})
		}
	})
	tr := newTransport(t, ts.Certificate())
	req, _ := http.NewRequest(http.MethodGet, ts.URL, nil)
	r := await(t, startAsync(tr, req))
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.resp.Body.Close()
	waitFor(t, "the reset to arrive", func() bool { _, s := tr.connStats(); return s == 0 })
	b, err := io.ReadAll(r.resp.Body)
	var se http2.StreamError
	if string(b) != "data: last event\n\n" || !errors.As(err, &se) || se.Code != http2.ErrCodeInternal {
		t.Fatalf("read %q, %v; want the event, then the reset", b, err)
	}
}
