package h2async

import (
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"sync"
)

// Receive windows we advertise. The connection window covers every stream's
// full window (maxStreamsCap of them, as net/http's 1 GiB does): were it
// smaller, a few readers that stop reading would use it up and stall every
// other stream on the connection. Memory stays bounded by the stream windows.
const (
	streamRecvWindow = 1 << 20
	connRecvWindow   = 1 << 30
	// connUpdateBatch is how many read bytes are returned to the connection
	// window at once. It is small next to the window: batching a quarter of
	// 1 GiB could leave it closed while streams still had window.
	connUpdateBatch = streamRecvWindow / 4
	// bigBuffer is the receive buffer capacity above which an emptied buffer is
	// dropped rather than kept, so an idle stream does not pin a large array.
	bigBuffer = 64 << 10
)

var errBodyClosed = errors.New("h2async: read on closed response body")

// stream is one request: the only per-request state while it is pending. The
// fields after the immutable ones are guarded by Transport.mu, except the
// response body's, which mu guards (taken after Transport.mu, never before), so
// that callers reading their answers do not wait on every connection's reader.
type stream struct {
	t    *Transport
	req  *http.Request
	key  string
	done func(*http.Response, error)
	stop func() bool // stops the context.AfterFunc

	bodyLen  int // the request body's full length, for content-length
	attempts int
	gzip     bool // the transport asks for gzip and decompresses it (see DisableCompression)

	conn      *conn          // nil while waiting in the pool
	id        uint32         // 0 until its HEADERS are handed to the writer
	dead      bool           // no longer open on conn (ended, reset or conn closed)
	finished  bool           // done has been called
	sendBody  []byte         // the part of the request body not yet handed to the writer
	bodyTaken bool           // part of the body went to the writer (a retry must replay it)
	endSent   bool           // END_STREAM handed to the writer
	sendWin   int64          // peer's window for this stream
	resp      *http.Response // set when the response headers arrive
	recvWin   int64          // how much more the peer may send on this stream
	recvOwed  int64          // read bytes not yet returned to the peer by WINDOW_UPDATE

	mu         sync.Mutex
	cond       sync.Cond // signals Body.Read; L is &mu
	buf        []byte    // received, not yet read body bytes (from off)
	off        int
	eof        bool  // END_STREAM received
	err        error // what Body.Read returns once buf is drained
	bodyDone   bool  // Body.Read returned io.EOF
	bodyClosed bool
	unreturned int64 // bytes read but not yet given back to the flow-control windows
}

func newStream(t *Transport, req *http.Request, key string, body []byte, done func(*http.Response, error)) *stream {
	s := &stream{t: t, req: req, key: key, done: done, sendBody: body, bodyLen: len(body), recvWin: streamRecvWindow}
	s.gzip = !t.DisableCompression && req.Header.Get("Accept-Encoding") == "" && req.Header.Get("Range") == "" && req.Method != http.MethodHead
	s.cond.L = &s.mu
	return s
}

// returnBatch is how many read bytes a body gives back to the windows at once:
// the stream's WINDOW_UPDATE threshold, so Read takes Transport.mu only that often.
const returnBatch = streamRecvWindow / 4

// body is a response Body: it reads what the connection's reader buffered and
// gives flow-control window back as it goes, so a slow reader holds at most
// one stream window of data.
type body struct{ s *stream }

func (b body) Read(p []byte) (int, error) {
	s := b.s
	s.mu.Lock()
	for {
		// What arrived before a reset or a lost connection is read first, as with
		// net/http; after Close, buf is empty and err is errBodyClosed.
		if s.off < len(s.buf) {
			n := copy(p, s.buf[s.off:])
			s.off += n
			if s.off == len(s.buf) {
				s.off = 0
				s.buf = s.buf[:0]
				if cap(s.buf) > bigBuffer {
					s.buf = nil
				}
			}
			s.unreturned += int64(n)
			owed := s.takeUnreturned(returnBatch)
			s.mu.Unlock()
			s.giveBack(owed)
			return n, nil
		}
		if s.err != nil {
			err := s.err
			s.mu.Unlock()
			return 0, err
		}
		if s.eof {
			s.bodyDone = true
			owed := s.takeUnreturned(0)
			s.mu.Unlock()
			s.stop()
			s.giveBack(owed)
			return 0, io.EOF
		}
		if len(p) == 0 {
			s.mu.Unlock()
			return 0, nil
		}
		s.cond.Wait()
	}
}

// takeUnreturned hands over the read bytes not yet given back, if there are at
// least min of them. Caller holds s.mu.
func (s *stream) takeUnreturned(min int64) int64 {
	n := s.unreturned
	if n == 0 || n < min {
		return 0
	}
	s.unreturned = 0
	return n
}

// giveBack returns n read bytes to the stream's and the connection's windows.
func (s *stream) giveBack(n int64) {
	if n == 0 {
		return
	}
	s.t.mu.Lock()
	if s.conn != nil {
		s.conn.returnWindow(s, int(n))
	}
	s.t.mu.Unlock()
}

// Close before the end resets the stream (RST_STREAM CANCEL), freeing its slot
// and returning its unread bytes to the connection window.
func (b body) Close() error {
	s := b.s
	s.mu.Lock()
	if s.bodyClosed {
		s.mu.Unlock()
		return nil
	}
	s.bodyClosed = true
	unread := int64(len(s.buf)-s.off) + s.unreturned
	s.buf, s.off, s.unreturned = nil, 0, 0
	if s.err == nil {
		s.err = errBodyClosed
	}
	s.cond.Broadcast()
	s.mu.Unlock()
	s.stop()
	s.t.mu.Lock()
	if s.conn != nil {
		s.conn.returnConnWindow(int(unread))
		s.conn.resetStream(s)
	}
	s.t.mu.Unlock()
	return nil
}

// The connection window must hold every stream's window plus the bytes read
// but not yet returned (see connRecvWindow); this fails to compile otherwise.
var _ [connRecvWindow - maxStreamsCap*streamRecvWindow - connUpdateBatch]struct{}

// gzipBody decompresses a gzip response body as it is read; the gzip reader is
// made on the first Read, so the response callback never blocks on the body.
type gzipBody struct {
	body io.ReadCloser
	zr   *gzip.Reader
	err  error // a bad gzip header, returned by every Read
}

func (g *gzipBody) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if g.zr == nil {
		zr, err := gzip.NewReader(g.body)
		if err != nil {
			g.err = err
			return 0, err
		}
		g.zr = zr
	}
	return g.zr.Read(p)
}

func (g *gzipBody) Close() error { return g.body.Close() }
