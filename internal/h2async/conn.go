package h2async

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

const (
	// maxStreamsCap bounds the streams put on one connection whatever the
	// server advertises (RFC 9113 allows "unlimited"), to spread load.
	maxStreamsCap = 1000
	// writeBudget is how many DATA bytes one writer batch takes, so one large
	// body does not delay every other stream's frames.
	writeBudget = 256 << 10
	// maxWindow is the largest flow-control window HTTP/2 allows.
	maxWindow = 1<<31 - 1
)

// conn is one HTTP/2 connection. Apart from the immutable fields and those
// only its writer goroutine touches, everything is guarded by Transport.mu.
type conn struct {
	t   *Transport
	p   *pool
	raw net.Conn // the TCP connection, closed to shut c down
	nc  net.Conn // what frames are read from and written to (the TLS connection)
	tls tls.ConnectionState
	fr  *http2.Framer // reads by the reader goroutine, writes by the writer

	// writer-only
	bw   *bufio.Writer
	henc *hpack.Encoder
	hbuf bufferWriter

	wake       chan struct{} // 1-buffered: there is work for the writer
	closedCh   chan struct{}
	settingsCh chan struct{} // closed when the server's first SETTINGS arrives

	closed       bool
	err          error
	registered   bool // in p.conns
	goAway       bool // no new streams (GOAWAY received)
	gotSettings  bool
	streams      map[uint32]*stream
	headerQ      []*stream // waiting for the writer to send HEADERS
	sendQ        []*stream // with body bytes to send
	ctrlQ        []ctrlFrame
	nextID       uint32
	reserved     int // streams counted against maxStreams (headerQ + open)
	maxStreams   int
	peerInitWin  int64
	peerMaxFrame int
	tableSize    uint32
	tableDirty   bool
	sendWin      int64 // peer's connection window
	recvWin      int64 // how much more the peer may send on the connection
	recvOwed     int64 // consumed bytes not yet returned by WINDOW_UPDATE
	answered     int   // responses received: the connection made progress

	lastRead    time.Time
	pingOut     bool
	pingData    [8]byte
	healthTimer *time.Timer
	idleTimer   *time.Timer
	idleSince   time.Time
}

type ctrlKind uint8

const (
	ctrlSettingsAck ctrlKind = iota
	ctrlPing
	ctrlPingAck
	ctrlWindowUpdate
	ctrlReset
)

// ctrlFrame is a small frame queued for the writer.
type ctrlFrame struct {
	kind ctrlKind
	id   uint32
	val  uint32
	ping [8]byte
}

// dialConn connects, negotiates h2, sends our preface and waits for the
// server's SETTINGS (so the stream limit is known before streams are seated).
func (t *Transport) dialConn(p *pool) (*conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), t.dialTimeout())
	defer cancel()
	raw, nc, state, err := t.connect(ctx, p.key)
	if err != nil {
		return nil, err
	}
	c := newConn(t, p, raw, nc, state)
	if err := c.writePreface(); err != nil {
		raw.Close()
		return nil, fmt.Errorf("h2async: writing preface to %s: %w", p.key, err)
	}
	go c.readLoop()
	go c.writeLoop()
	select {
	case <-c.settingsCh:
		return c, nil
	case <-c.closedCh:
		t.mu.Lock()
		defer t.mu.Unlock()
		return nil, c.err
	case <-ctx.Done():
		t.mu.Lock()
		defer t.mu.Unlock()
		err := fmt.Errorf("h2async: %s sent no SETTINGS: %w", p.key, ctx.Err())
		c.close(err)
		return nil, err
	}
}

// connect dials addr and negotiates h2 over TLS; raw is the TCP connection under nc.
func (t *Transport) connect(ctx context.Context, addr string) (raw, nc net.Conn, state tls.ConnectionState, err error) {
	if t.dialH2 != nil {
		nc, err := t.dialH2(ctx, addr)
		return nc, nc, tls.ConnectionState{NegotiatedProtocol: http2.NextProtoTLS}, err
	}
	d := net.Dialer{KeepAlive: 30 * time.Second}
	raw, err = d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, state, fmt.Errorf("h2async: dialing %s: %w", addr, err)
	}
	host, _, _ := net.SplitHostPort(addr)
	tc := tls.Client(raw, t.tlsConfig(host))
	if err := tc.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, nil, state, fmt.Errorf("h2async: TLS handshake with %s: %w", addr, err)
	}
	if tc.ConnectionState().NegotiatedProtocol != http2.NextProtoTLS {
		raw.Close()
		return nil, nil, state, errNotH2
	}
	return raw, tc, tc.ConnectionState(), nil
}

func newConn(t *Transport, p *pool, raw, nc net.Conn, state tls.ConnectionState) *conn {
	c := &conn{
		t: t, p: p, raw: raw, nc: nc, tls: state,
		bw:           bufio.NewWriterSize(nc, 16<<10),
		wake:         make(chan struct{}, 1),
		closedCh:     make(chan struct{}),
		settingsCh:   make(chan struct{}),
		streams:      make(map[uint32]*stream),
		nextID:       1,
		maxStreams:   100,
		peerInitWin:  65535,
		peerMaxFrame: 16384,
		sendWin:      65535,
		recvWin:      connRecvWindow,
		lastRead:     time.Now(),
	}
	c.fr = http2.NewFramer(c.bw, bufio.NewReaderSize(nc, 16<<10))
	c.fr.SetMaxReadFrameSize(16384) // the RFC default, which we do not raise
	c.fr.MaxHeaderListSize = uint32(min(t.maxHeaderBytes(), maxWindow))
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.henc = hpack.NewEncoder(&c.hbuf)
	c.healthTimer = time.AfterFunc(t.readIdleTimeout(), c.checkHealth)
	return c
}

func (c *conn) writePreface() error {
	c.nc.SetWriteDeadline(time.Now().Add(c.t.writeTimeout()))
	if _, err := c.bw.WriteString(http2.ClientPreface); err != nil {
		return err
	}
	err := c.fr.WriteSettings(
		http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: streamRecvWindow},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: c.fr.MaxHeaderListSize},
	)
	if err != nil {
		return err
	}
	if err := c.fr.WriteWindowUpdate(0, connRecvWindow-65535); err != nil {
		return err
	}
	return c.bw.Flush()
}

// canTake reports whether one more stream may be put on c. Caller holds t.mu.
func (c *conn) canTake() bool {
	return !c.closed && !c.goAway && c.reserved < c.maxStreams && c.nextID < maxWindow-2*uint32(len(c.headerQ)+2)
}

// add seats s on c; the writer assigns its id when it sends the HEADERS, so
// ids go out in increasing order. Caller holds t.mu.
func (c *conn) add(s *stream) {
	s.conn = c
	c.reserved++
	c.headerQ = append(c.headerQ, s)
	c.wakeWriter()
}

func (c *conn) wakeWriter() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *conn) queue(f ctrlFrame) {
	c.ctrlQ = append(c.ctrlQ, f)
	c.wakeWriter()
}

// detach removes s from c (it will send or receive no more frames here) and
// frees its slot for a waiting request. Caller holds t.mu.
func (c *conn) detach(s *stream) {
	if s.conn != c || s.dead {
		return
	}
	s.dead = true
	if s.id != 0 {
		delete(c.streams, s.id)
	}
	c.reserved--
	if c.reserved == 0 && !c.closed {
		if c.goAway {
			c.close(errors.New("h2async: connection finished after GOAWAY"))
			return
		}
		if c.registered {
			c.becameIdle()
		}
	}
	if len(c.p.waiting) > 0 {
		c.t.drain(c.p)
	}
}

// resetStream ends s on c from our side: RST_STREAM(CANCEL) if the server
// knows the stream, then detach. Caller holds t.mu.
func (c *conn) resetStream(s *stream) {
	if s.conn != c || s.dead {
		return
	}
	if s.id != 0 && !c.closed {
		c.queue(ctrlFrame{kind: ctrlReset, id: s.id, val: uint32(http2.ErrCodeCancel)})
	}
	c.detach(s)
}

// failStream resets s with code and reports err to its caller. Caller holds t.mu.
func (c *conn) failStream(s *stream, code http2.ErrCode, err error) {
	if s.id != 0 && !s.dead {
		c.queue(ctrlFrame{kind: ctrlReset, id: s.id, val: uint32(code)})
	}
	c.detach(s)
	c.t.deliverErr(s, err)
}

// deliverErr gives err to whoever waits on s: done before the headers, Body.Read
// after (unless the body has fully arrived). Caller holds t.mu.
func (t *Transport) deliverErr(s *stream, err error) {
	if s.resp == nil {
		t.finish(s, nil, err)
		return
	}
	s.mu.Lock()
	if !s.eof && s.err == nil {
		s.err = err
		s.stop()
		s.cond.Broadcast()
	}
	s.mu.Unlock()
}

// returnWindow gives n read bytes back to the peer, batching WINDOW_UPDATEs to
// a quarter of the stream window (for the connection too: see connUpdateBatch).
// Caller holds t.mu.
func (c *conn) returnWindow(s *stream, n int) {
	c.returnConnWindow(n)
	if s.dead || c.closed {
		return
	}
	s.recvOwed += int64(n)
	if s.recvOwed >= streamRecvWindow/4 {
		c.queue(ctrlFrame{kind: ctrlWindowUpdate, id: s.id, val: uint32(s.recvOwed)})
		s.recvWin += s.recvOwed
		s.recvOwed = 0
	}
}

func (c *conn) returnConnWindow(n int) {
	if n <= 0 || c.closed {
		return
	}
	c.recvOwed += int64(n)
	if c.recvOwed >= connUpdateBatch {
		c.queue(ctrlFrame{kind: ctrlWindowUpdate, id: 0, val: uint32(c.recvOwed)})
		c.recvWin += c.recvOwed
		c.recvOwed = 0
	}
}

// close shuts c down: streams never sent go to another connection, streams
// the server may have seen fail with err. Caller holds t.mu.
func (c *conn) close(err error) {
	if c.closed {
		return
	}
	c.closed = true
	c.err = err
	close(c.closedCh)
	// Closing the TCP conn, not the TLS one, cannot block on a close_notify
	// write while we hold the lock; the reader and writer see errors and exit.
	c.raw.Close()
	c.healthTimer.Stop()
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
	c.p.remove(c)
	for _, s := range c.headerQ {
		if s.conn == c && !s.dead {
			c.detach(s)
			c.t.requeue(s, c.answered == 0)
		}
	}
	c.headerQ, c.sendQ = nil, nil
	for _, s := range c.streams {
		c.detach(s)
		c.t.deliverErr(s, err)
	}
	c.t.drain(c.p)
}

// becameIdle arms the idle-close timer. Caller holds t.mu.
func (c *conn) becameIdle() {
	c.idleSince = time.Now()
	d := c.t.idleConnTimeout()
	if c.idleTimer == nil {
		c.idleTimer = time.AfterFunc(d, c.checkIdle)
	} else {
		c.idleTimer.Reset(d)
	}
}

func (c *conn) checkIdle() {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	if c.closed || c.reserved > 0 {
		return
	}
	if left := c.t.idleConnTimeout() - time.Since(c.idleSince); left > 0 {
		c.idleTimer.Reset(left)
		return
	}
	c.close(errors.New("h2async: idle connection closed"))
}

// checkHealth runs when nothing has been read for ReadIdleTimeout: it sends a
// PING, and closes the connection if the previous PING went unanswered.
func (c *conn) checkHealth() {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	if c.closed {
		return
	}
	if c.pingOut {
		c.close(fmt.Errorf("h2async: %s did not answer a PING within %v", c.p.key, c.t.pingTimeout()))
		return
	}
	if left := c.t.readIdleTimeout() - time.Since(c.lastRead); left > 0 {
		c.healthTimer.Reset(left)
		return
	}
	c.pingOut = true
	c.pingData[0]++
	c.queue(ctrlFrame{kind: ctrlPing, ping: c.pingData})
	c.healthTimer.Reset(c.t.pingTimeout())
}

// readLoop is the connection's reader goroutine.
func (c *conn) readLoop() {
	for {
		f, err := c.fr.ReadFrame()
		c.t.mu.Lock()
		if err == nil {
			c.lastRead = time.Now()
			err = c.handle(f)
		} else if se := (http2.StreamError{}); errors.As(err, &se) {
			if s := c.streams[se.StreamID]; s != nil {
				c.failStream(s, se.Code, fmt.Errorf("h2async: malformed response: %w", se))
			}
			err = nil
		} else {
			err = fmt.Errorf("h2async: connection to %s lost: %w", c.p.key, err)
		}
		if err != nil {
			c.close(err)
		}
		closed := c.closed
		c.t.mu.Unlock()
		if closed {
			return
		}
	}
}

// handle applies one frame to the connection state. Caller holds t.mu.
func (c *conn) handle(f http2.Frame) error {
	if sf, ok := f.(*http2.SettingsFrame); !c.gotSettings && (!ok || sf.IsAck()) {
		return errors.New("h2async: server did not start with SETTINGS")
	}
	switch f := f.(type) {
	case *http2.SettingsFrame:
		return c.onSettings(f)
	case *http2.MetaHeadersFrame:
		return c.onHeaders(f)
	case *http2.DataFrame:
		return c.onData(f)
	case *http2.WindowUpdateFrame:
		return c.onWindowUpdate(f)
	case *http2.RSTStreamFrame:
		c.onReset(f)
	case *http2.PingFrame:
		c.onPing(f)
	case *http2.GoAwayFrame:
		c.onGoAway(f)
	case *http2.PushPromiseFrame:
		return errors.New("h2async: server pushed although push is disabled")
	}
	return nil
}

func (c *conn) onSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	err := f.ForeachSetting(func(st http2.Setting) error {
		if err := st.Valid(); err != nil {
			return err
		}
		switch st.ID {
		case http2.SettingMaxConcurrentStreams:
			c.maxStreams = int(min(st.Val, maxStreamsCap))
		case http2.SettingInitialWindowSize:
			// The change applies to every open stream's window (RFC 9113 6.9.2).
			// Growing a window past 2^31-1 is a FLOW_CONTROL_ERROR on the connection.
			delta := int64(st.Val) - c.peerInitWin
			for _, s := range c.streams {
				s.sendWin += delta
				if s.sendWin > maxWindow {
					return fmt.Errorf("stream %d flow-control window overflow", s.id)
				}
			}
			c.peerInitWin = int64(st.Val)
		case http2.SettingMaxFrameSize:
			c.peerMaxFrame = int(st.Val)
		case http2.SettingHeaderTableSize:
			c.tableSize, c.tableDirty = st.Val, true
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("h2async: bad SETTINGS from %s: %w", c.p.key, err)
	}
	c.queue(ctrlFrame{kind: ctrlSettingsAck})
	if !c.gotSettings {
		c.gotSettings = true
		close(c.settingsCh)
	} else if c.registered && len(c.p.waiting) > 0 {
		c.t.drain(c.p)
	}
	return nil
}

func (c *conn) onHeaders(f *http2.MetaHeadersFrame) error {
	s := c.streams[f.StreamID]
	if s == nil {
		return nil // a stream we reset; its frames may still be in flight
	}
	if f.Truncated {
		c.failStream(s, http2.ErrCodeCancel, errors.New("h2async: response headers too large"))
		return nil
	}
	if s.resp != nil { // trailers
		if !f.StreamEnded() {
			c.failStream(s, http2.ErrCodeProtocol, errors.New("h2async: malformed response: HEADERS after the response without END_STREAM"))
			return nil
		}
		s.resp.Trailer = make(http.Header)
		for _, hf := range f.RegularFields() {
			s.resp.Trailer.Add(http.CanonicalHeaderKey(hf.Name), hf.Value)
		}
		c.remoteEnded(s)
		return nil
	}
	status := f.PseudoValue("status")
	code, err := strconv.Atoi(status)
	if err != nil || len(status) != 3 {
		c.failStream(s, http2.ErrCodeProtocol, errors.New("h2async: malformed response: bad :status"))
		return nil
	}
	if code < 200 {
		// 1xx informational responses are skipped; the final one follows.
		if f.StreamEnded() || code == http.StatusSwitchingProtocols {
			c.failStream(s, http2.ErrCodeProtocol, errors.New("h2async: malformed response: unexpected 1xx"))
		}
		return nil
	}
	s.resp = c.newResponse(s, f, code)
	c.answered++
	if f.StreamEnded() {
		c.remoteEnded(s)
	}
	c.t.finish(s, s.resp, nil)
	return nil
}

func (c *conn) newResponse(s *stream, f *http2.MetaHeadersFrame, code int) *http.Response {
	regular := f.RegularFields()
	h := make(http.Header, len(regular))
	for _, hf := range regular {
		h.Add(http.CanonicalHeaderKey(hf.Name), hf.Value)
	}
	resp := &http.Response{
		Status:     strconv.Itoa(code) + " " + http.StatusText(code),
		StatusCode: code,
		Proto:      "HTTP/2.0",
		ProtoMajor: 2,
		Header:     h,
		Body:       body{s},
		Request:    s.req,
		TLS:        &c.tls,
	}
	resp.ContentLength = -1
	if cl := h.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n >= 0 {
			resp.ContentLength = n
		}
	} else if f.StreamEnded() {
		resp.ContentLength = 0
	}
	if s.gzip && strings.EqualFold(h.Get("Content-Encoding"), "gzip") && !f.StreamEnded() {
		h.Del("Content-Encoding")
		h.Del("Content-Length")
		resp.ContentLength = -1
		resp.Body = &gzipBody{body: resp.Body}
		resp.Uncompressed = true
	}
	return resp
}

// remoteEnded handles the server's END_STREAM: the body is complete, and if
// our request body is still being sent the server no longer wants it.
func (c *conn) remoteEnded(s *stream) {
	s.mu.Lock()
	s.eof = true
	s.cond.Broadcast()
	s.mu.Unlock()
	if !s.endSent {
		c.resetStream(s)
		return
	}
	c.detach(s)
}

func (c *conn) onData(f *http2.DataFrame) error {
	n := int64(f.Length) // counts padding, as flow control does
	c.recvWin -= n
	if c.recvWin < 0 {
		return fmt.Errorf("h2async: %s overran the connection flow-control window", c.p.key)
	}
	s := c.streams[f.StreamID]
	data := f.Data()
	if s == nil {
		c.returnConnWindow(int(n)) // nobody will read it
		return nil
	}
	if s.resp == nil {
		c.returnConnWindow(int(n))
		c.failStream(s, http2.ErrCodeProtocol, errors.New("h2async: malformed response: DATA before HEADERS"))
		return nil
	}
	s.recvWin -= n
	if s.recvWin < 0 {
		c.returnConnWindow(int(n))
		c.failStream(s, http2.ErrCodeFlowControl, errors.New("h2async: server overran the stream flow-control window"))
		return nil
	}
	if pad := int(n) - len(data); pad > 0 {
		c.returnWindow(s, pad)
	}
	if len(data) > 0 {
		s.mu.Lock()
		if s.bodyClosed {
			c.returnConnWindow(len(data)) // nobody will read it
		} else {
			s.buf = append(s.buf, data...)
			s.cond.Broadcast()
		}
		s.mu.Unlock()
	}
	if f.StreamEnded() {
		c.remoteEnded(s)
	}
	return nil
}

func (c *conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	if f.StreamID == 0 {
		c.sendWin += int64(f.Increment)
		if c.sendWin > maxWindow {
			return errors.New("h2async: connection flow-control window overflow")
		}
	} else if s := c.streams[f.StreamID]; s != nil {
		s.sendWin += int64(f.Increment)
		if s.sendWin > maxWindow {
			c.failStream(s, http2.ErrCodeFlowControl, errors.New("h2async: stream flow-control window overflow"))
			return nil
		}
	}
	c.wakeWriter()
	return nil
}

func (c *conn) onReset(f *http2.RSTStreamFrame) {
	s := c.streams[f.StreamID]
	if s == nil {
		return
	}
	c.detach(s)
	if s.resp == nil && f.ErrCode == http2.ErrCodeRefusedStream {
		c.t.requeue(s, true) // refused streams were not processed: safe to send again
		return
	}
	c.t.deliverErr(s, fmt.Errorf("h2async: server reset the stream: %w", http2.StreamError{StreamID: f.StreamID, Code: f.ErrCode}))
}

func (c *conn) onPing(f *http2.PingFrame) {
	if !f.IsAck() {
		c.queue(ctrlFrame{kind: ctrlPingAck, ping: f.Data})
		return
	}
	if c.pingOut && f.Data == c.pingData {
		c.pingOut = false
		c.healthTimer.Reset(c.t.readIdleTimeout())
	}
}

// onGoAway stops new streams on c and sends again, elsewhere, those the
// server says it did not process.
func (c *conn) onGoAway(f *http2.GoAwayFrame) {
	c.goAway = true
	// A connection that processed requests before its GOAWAY made progress: the
	// requests it turns away are sent again without using up their attempts.
	counted := f.LastStreamID == 0 && c.answered == 0
	for id, s := range c.streams {
		if id > f.LastStreamID && s.resp == nil {
			c.detach(s)
			c.t.requeue(s, counted)
		}
	}
	for _, s := range c.headerQ {
		if s.conn == c && !s.dead {
			c.detach(s)
			c.t.requeue(s, counted)
		}
	}
	c.headerQ = nil
	if c.reserved == 0 {
		c.close(errors.New("h2async: connection closed after GOAWAY"))
	}
}
