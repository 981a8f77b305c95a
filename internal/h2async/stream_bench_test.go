package h2async

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// BenchmarkStreamedCalls runs 2,000 streamed calls at once, each an SSE answer of
// 40 events of 100 bytes in separate DATA frames (as a model streams tokens), read by
// its caller in 4 KB reads; one op is one call. The server is an in-process,
// hand-driven HTTP/2 peer (100 streams a connection, so 20 connections) that costs
// little next to the client, so what is measured is the client's frame handling and
// Body.Read: the contention between every connection's reader and every caller's
// reads.
//
//	go test -run '^$' -bench StreamedCalls -benchtime 5x -cpu 2 ./internal/h2async/
func BenchmarkStreamedCalls(b *testing.B) {
	const calls, events = 2000, 40
	ts := newStreamingServer(b, events)
	roots := x509.NewCertPool()
	roots.AddCert(ts.cert)
	b.Run("h2async", func(b *testing.B) {
		tr := &Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
		defer tr.CloseIdleConnections()
		benchStreamed(b, ts.url, calls, events, func(req *http.Request, done func(*http.Response, error)) { tr.Start(req, done) })
	})
	b.Run("net-http", func(b *testing.B) {
		nt := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 100}
		defer nt.CloseIdleConnections()
		benchStreamed(b, ts.url, calls, events, func(req *http.Request, done func(*http.Response, error)) {
			go func() { done(nt.RoundTrip(req)) }()
		})
	})
}

func benchStreamed(b *testing.B, url string, calls, events int, start func(*http.Request, func(*http.Response, error))) {
	want := int64(events * 100)
	round := func() {
		var wg sync.WaitGroup
		var failed atomic.Int32
		for range calls {
			wg.Add(1)
			req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(`{"stream":true}`)))
			start(req, func(resp *http.Response, err error) {
				defer wg.Done()
				if err != nil {
					failed.Add(1)
					return
				}
				defer resp.Body.Close()
				buf := make([]byte, 4096)
				var n int64
				for {
					k, err := resp.Body.Read(buf)
					n += int64(k)
					if err != nil {
						break
					}
				}
				if n != want {
					failed.Add(1)
				}
			})
		}
		wg.Wait()
		if f := failed.Load(); f > 0 {
			b.Fatalf("%d of %d calls failed", f, calls)
		}
	}
	round() // connections open
	b.ResetTimer()
	t0 := time.Now()
	for range b.N {
		round()
	}
	b.ReportMetric(float64(time.Since(t0).Nanoseconds())/float64(b.N*calls), "ns/call")
	b.ReportMetric(float64(b.N*calls)/time.Since(t0).Seconds(), "calls/s")
}

type streamingServer struct {
	url  string
	cert *x509.Certificate
}

// newStreamingServer answers every stream with a text/event-stream response of
// events 100-byte DATA frames. One goroutine a connection writes them, round-robin
// across its streams through a buffer flushed when a round is written, so the
// server costs little next to the client it measures.
func newStreamingServer(b *testing.B, events int) *streamingServer {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
	enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "text/event-stream"})
	headers := hb.Bytes()
	event := []byte(fmt.Sprintf("data: {\"delta\":%q}\n\n", bytes.Repeat([]byte("x"), 100-len("data: {\"delta\":\"\"}\n\n"))))
	ts := newRawServer(b, func(_ int, rc *rawConn) {
		ids := make(chan uint32, 1000)
		go streamEvents(rc, ids, headers, event, events)
		defer close(ids)
		for {
			f, err := rc.readFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.DataFrame:
				if f.StreamEnded() {
					ids <- f.StreamID
				}
			case *http2.MetaHeadersFrame:
				if f.StreamEnded() {
					ids <- f.StreamID
				}
			}
		}
	})
	return &streamingServer{url: ts.URL, cert: ts.Certificate()}
}

// streamEvents answers the streams whose ids arrive, interleaving their events.
func streamEvents(rc *rawConn, ids <-chan uint32, headers, event []byte, events int) {
	bw := bufio.NewWriterSize(rc.c, 64<<10)
	fr := http2.NewFramer(bw, nil)
	sent := map[uint32]int{}
	for {
		if len(sent) == 0 {
			id, ok := <-ids
			if !ok {
				return
			}
			sent[id] = -1
		}
	more:
		for {
			select {
			case id, ok := <-ids:
				if !ok {
					return
				}
				sent[id] = -1
			default:
				break more
			}
		}
		err := rc.write(func() error {
			for id, n := range sent {
				var err error
				if n < 0 {
					err = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: headers, EndHeaders: true})
				} else {
					err = fr.WriteData(id, n == events-1, event)
				}
				if err != nil {
					return err
				}
				if n == events-1 {
					delete(sent, id)
				} else {
					sent[id] = n + 1
				}
			}
			return bw.Flush()
		})
		if err != nil {
			return
		}
	}
}
