package h2async

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// batch is the work one writer round takes from the connection under the
// lock and then writes without it.
type batch struct {
	ctrl      []ctrlFrame
	heads     []headWork
	data      []dataChunk
	tableSize uint32
	setTable  bool
}

// headWork is one stream's HEADERS to write. The id is copied under the lock:
// a GOAWAY read while the writer is busy may requeue the stream, which zeroes
// s.id (or gives it another connection's id) before its frames are written.
type headWork struct {
	s   *stream
	id  uint32
	end bool
}

type dataChunk struct {
	id  uint32
	p   []byte
	end bool
}

func (b *batch) reset() {
	clear(b.heads)
	clear(b.data)
	b.ctrl, b.heads, b.data = b.ctrl[:0], b.heads[:0], b.data[:0]
	b.setTable = false
}

func (b *batch) empty() bool {
	return len(b.ctrl) == 0 && len(b.heads) == 0 && len(b.data) == 0 && !b.setTable
}

// writeLoop is the connection's writer goroutine: it alone writes frames, so
// stream ids reach the server in increasing order and HPACK state stays in step.
func (c *conn) writeLoop() {
	var b batch
	for {
		c.t.mu.Lock()
		ok := c.takeWork(&b)
		c.t.mu.Unlock()
		if !ok {
			return
		}
		if b.empty() {
			select {
			case <-c.wake:
				continue
			case <-c.closedCh:
				return
			}
		}
		if err := c.writeBatch(&b); err != nil {
			c.t.mu.Lock()
			c.close(fmt.Errorf("h2async: writing to %s: %w", c.p.key, err))
			c.t.mu.Unlock()
			return
		}
	}
}

// takeWork moves queued frames into b: control frames, HEADERS for new
// streams (assigning their ids), then DATA as far as the windows allow.
// It reports false once the connection is closed. Caller holds t.mu.
func (c *conn) takeWork(b *batch) bool {
	b.reset()
	if c.closed {
		return false
	}
	b.ctrl = append(b.ctrl, c.ctrlQ...)
	clear(c.ctrlQ)
	c.ctrlQ = c.ctrlQ[:0]
	if c.tableDirty {
		b.tableSize, b.setTable, c.tableDirty = c.tableSize, true, false
	}
	for _, s := range c.headerQ {
		if s.conn != c || s.dead {
			continue
		}
		s.id = c.nextID
		c.nextID += 2
		c.streams[s.id] = s
		s.sendWin = c.peerInitWin
		end := len(s.sendBody) == 0
		if end {
			s.endSent = true
		} else {
			c.sendQ = append(c.sendQ, s)
		}
		b.heads = append(b.heads, headWork{s: s, id: s.id, end: end})
	}
	clear(c.headerQ)
	c.headerQ = c.headerQ[:0]
	c.takeData(b)
	return true
}

// takeData slices body chunks for streams whose stream and connection windows
// are open; a stream without window stays queued until a WINDOW_UPDATE.
func (c *conn) takeData(b *batch) {
	budget := writeBudget
	keep := c.sendQ[:0]
	for _, s := range c.sendQ {
		if s.conn != c || s.dead || len(s.sendBody) == 0 {
			continue
		}
		for len(s.sendBody) > 0 {
			n := min(int64(len(s.sendBody)), s.sendWin, c.sendWin, int64(c.peerMaxFrame), int64(budget))
			if n <= 0 {
				break
			}
			chunk := s.sendBody[:n]
			s.sendBody = s.sendBody[n:]
			s.bodyTaken = true
			s.sendWin -= n
			c.sendWin -= n
			budget -= int(n)
			end := len(s.sendBody) == 0
			if end {
				// Dropping our reference lets the body be collected once written.
				s.sendBody, s.endSent = nil, true
			}
			b.data = append(b.data, dataChunk{id: s.id, p: chunk, end: end})
		}
		if len(s.sendBody) > 0 {
			keep = append(keep, s)
		}
	}
	clear(c.sendQ[len(keep):])
	c.sendQ = keep
}

func (c *conn) writeBatch(b *batch) error {
	if err := c.nc.SetWriteDeadline(time.Now().Add(c.t.writeTimeout())); err != nil {
		return err
	}
	if b.setTable {
		c.henc.SetMaxDynamicTableSizeLimit(b.tableSize)
	}
	for _, f := range b.ctrl {
		if err := c.writeCtrl(f); err != nil {
			return err
		}
	}
	for _, h := range b.heads {
		if err := c.writeHeaders(h); err != nil {
			return err
		}
	}
	for _, d := range b.data {
		if err := c.fr.WriteData(d.id, d.end, d.p); err != nil {
			return err
		}
	}
	return c.bw.Flush()
}

func (c *conn) writeCtrl(f ctrlFrame) error {
	switch f.kind {
	case ctrlSettingsAck:
		return c.fr.WriteSettingsAck()
	case ctrlPing:
		return c.fr.WritePing(false, f.ping)
	case ctrlPingAck:
		return c.fr.WritePing(true, f.ping)
	case ctrlWindowUpdate:
		return c.fr.WriteWindowUpdate(f.id, f.val)
	case ctrlReset:
		return c.fr.WriteRSTStream(f.id, http2.ErrCode(f.val))
	}
	return errors.New("h2async: unknown control frame")
}

// writeHeaders encodes s's request header block and writes it as HEADERS plus
// as many CONTINUATION frames as the peer's frame size requires.
func (c *conn) writeHeaders(h headWork) error {
	block := c.encodeHeaders(h.s)
	first := true
	for first || len(block) > 0 {
		n := min(len(block), c.peerMaxFrameSize())
		frag := block[:n]
		block = block[n:]
		var err error
		if first {
			err = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: h.id, BlockFragment: frag, EndStream: h.end, EndHeaders: len(block) == 0})
			first = false
		} else {
			err = c.fr.WriteContinuation(h.id, len(block) == 0, frag)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *conn) peerMaxFrameSize() int {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	return c.peerMaxFrame
}

// connectionHeaders are HTTP/1 hop-by-hop headers HTTP/2 forbids (RFC 9113 8.2.2).
var connectionHeaders = map[string]bool{
	"connection": true, "keep-alive": true, "proxy-connection": true,
	"transfer-encoding": true, "upgrade": true, "host": true, "content-length": true,
}

// encodeHeaders HPACK-encodes the request's pseudo-headers and fields; req is
// not changed by the caller after Start, so reading it here needs no lock.
func (c *conn) encodeHeaders(s *stream) []byte {
	req := s.req
	c.hbuf = c.hbuf[:0]
	write := func(name, value string, sensitive bool) {
		c.henc.WriteField(hpack.HeaderField{Name: name, Value: value, Sensitive: sensitive})
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	write(":authority", host, false)
	write(":method", method, false)
	write(":path", req.URL.RequestURI(), false)
	write(":scheme", "https", false)
	hasUA := false
	for k, vv := range req.Header {
		name := strings.ToLower(k)
		if connectionHeaders[name] {
			continue
		}
		hasUA = hasUA || name == "user-agent"
		sensitive := name == "authorization" || name == "proxy-authorization" || name == "cookie"
		for _, v := range vv {
			if name == "te" && v != "trailers" {
				continue
			}
			write(name, v, sensitive)
		}
	}
	if s.bodyLen > 0 || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		write("content-length", strconv.Itoa(s.bodyLen), false)
	}
	if s.gzip {
		write("accept-encoding", "gzip", false)
	}
	if !hasUA {
		write("user-agent", "Go-http-client/2.0", false)
	}
	return c.hbuf
}

// bufferWriter is the HPACK encoder's output, reused for every header block.
type bufferWriter []byte

func (w *bufferWriter) Write(p []byte) (int, error) {
	*w = append(*w, p...)
	return len(p), nil
}
