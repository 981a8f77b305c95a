package h2async

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// FuzzServerFrames feeds arbitrary bytes, as the server's frames after its SETTINGS, to
// a connection carrying three requests (a GET, a POST whose body needs more window than
// the initial one, a GET read to the end), over net.Pipe. The server then closes the
// connection, so whatever the bytes, every request must get its answer or an error and
// every body must end: no panic, no hang.
func FuzzServerFrames(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, frames []byte) {
		var dials atomic.Int32
		tr := &Transport{dialH2: func(ctx context.Context, addr string) (net.Conn, error) {
			if dials.Add(1) > 1 {
				return nil, errors.New("fuzz: one connection only")
			}
			cli, srv := net.Pipe()
			go fuzzServer(srv, frames, 3)
			return cli, nil
		}}
		defer tr.CloseIdleConnections()
		var chans []<-chan result
		for i, method := range []string{http.MethodGet, http.MethodPost, http.MethodGet} {
			var body io.Reader
			if method == http.MethodPost {
				body = bytes.NewReader(make([]byte, 100<<10))
			}
			req, err := http.NewRequest(method, "https://fuzz.test/"+strings.Repeat("x", i), body)
			if err != nil {
				t.Fatal(err)
			}
			chans = append(chans, startAsync(tr, req))
		}
		for _, ch := range chans {
			r := await(t, ch)
			if r.err != nil {
				continue
			}
			read := make(chan struct{})
			go func() {
				io.Copy(io.Discard, r.resp.Body)
				close(read)
			}()
			select {
			case <-read:
			case <-time.After(10 * time.Second):
				t.Fatal("a response body did not end within 10s of the server closing the connection")
			}
			r.resp.Body.Close()
		}
	})
}

// fuzzServer reads the client preface, sends an empty SETTINGS frame, waits until
// the client has sent the HEADERS of its first streams (so the fuzzed frames find
// streams 1, 3, 5 open), writes frames and closes the connection. It drains what
// the client writes meanwhile, so the client never blocks on the pipe.
func fuzzServer(c net.Conn, frames []byte, streams int) {
	defer c.Close()
	br := bufio.NewReader(c)
	if _, err := io.ReadFull(br, make([]byte, len(http2.ClientPreface))); err != nil {
		return
	}
	seated := make(chan struct{})
	go func() {
		fr := http2.NewFramer(nil, br)
		n := 0
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				if n < streams {
					close(seated)
				}
				io.Copy(io.Discard, br)
				return
			}
			if _, ok := f.(*http2.HeadersFrame); ok {
				if n++; n == streams {
					close(seated)
				}
			}
		}
	}()
	if err := http2.NewFramer(c, nil).WriteSettings(); err != nil {
		return
	}
	select {
	case <-seated:
	case <-time.After(5 * time.Second):
	}
	c.Write(frames)
}

// fuzzSeeds are well-formed server frame sequences for streams 1, 3 and 5: answers,
// trailers, CONTINUATION, flow control, resets, GOAWAY, PING, SETTINGS, a push.
func fuzzSeeds() [][]byte {
	var out [][]byte
	seq := func(write func(fr *http2.Framer, hdr func(...string) []byte)) {
		var buf bytes.Buffer
		fr := http2.NewFramer(&buf, nil)
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		hdr := func(kv ...string) []byte {
			hb.Reset()
			for i := 0; i+1 < len(kv); i += 2 {
				enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
			}
			return append([]byte(nil), hb.Bytes()...)
		}
		write(fr, hdr)
		out = append(out, buf.Bytes())
	}
	seq(func(fr *http2.Framer, hdr func(...string) []byte) {
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hdr(":status", "200", "content-type", "text/event-stream"), EndHeaders: true})
		fr.WriteData(1, false, []byte("data: one\n\n"))
		fr.WriteWindowUpdate(0, 1<<20)
		fr.WriteWindowUpdate(3, 1<<20)
		fr.WriteData(1, true, []byte("data: two\n\n"))
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: hdr(":status", "201", "content-length", "2"), EndHeaders: true})
		fr.WriteData(3, true, []byte("ok"))
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: hdr(":status", "200"), EndHeaders: true})
		fr.WriteDataPadded(5, false, []byte("padded"), make([]byte, 20))
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: hdr("grpc-status", "0"), EndHeaders: true, EndStream: true})
	})
	seq(func(fr *http2.Framer, hdr func(...string) []byte) {
		block := hdr(":status", "103", "link", "</a>")
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndHeaders: true})
		block = hdr(":status", "200", "x-long", strings.Repeat("v", 300))
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:10]})
		fr.WriteContinuation(1, true, block[10:])
		fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20}, http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 1})
		fr.WritePing(false, [8]byte{1})
		fr.WriteRSTStream(3, http2.ErrCodeRefusedStream)
		fr.WriteRSTStream(1, http2.ErrCodeInternal)
		fr.WriteGoAway(1, http2.ErrCodeNo, []byte("bye"))
	})
	seq(func(fr *http2.Framer, hdr func(...string) []byte) {
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: hdr(":status", "200", "content-encoding", "gzip"), EndHeaders: true})
		fr.WriteData(5, false, []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff})
		fr.WritePushPromise(http2.PushPromiseParam{StreamID: 5, PromiseID: 2, BlockFragment: hdr(":method", "GET", ":path", "/p", ":scheme", "https", ":authority", "fuzz.test"), EndHeaders: true})
	})
	seq(func(fr *http2.Framer, hdr func(...string) []byte) {
		fr.WriteData(1, false, []byte("data before headers"))
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: hdr(":status", "2000"), EndHeaders: true})
		fr.WriteWindowUpdate(3, 1<<31-1)
		fr.WriteWindowUpdate(3, 1<<31-1)
		fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0}, http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 14})
	})
	return out
}
