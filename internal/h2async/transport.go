package h2async

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Defaults for the zero values of Transport's fields.
const (
	defaultDialTimeout     = 30 * time.Second
	defaultReadIdleTimeout = 30 * time.Second
	defaultPingTimeout     = 15 * time.Second
	defaultIdleConnTimeout = 90 * time.Second
	defaultWriteTimeout    = 30 * time.Second
	defaultMaxHeaderBytes  = 10 << 20
	defaultMaxBodyBytes    = 64 << 20

	// h1Memory is how long an authority that did not negotiate h2 is sent to
	// Fallback without trying again.
	h1Memory = 10 * time.Minute
	// maxParallelDials bounds the connections being dialled at once to one
	// authority, so a burst of queued requests does not open a flood of them.
	maxParallelDials = 8
	// maxAttempts bounds how often one request is sent again after a REFUSED_STREAM,
	// or after a GOAWAY from a connection that processed nothing, so a misbehaving
	// server cannot make it loop forever. A GOAWAY from a connection that did
	// process requests (a server that ends connections every N requests, as nginx's
	// keepalive_requests does) is progress and does not count.
	maxAttempts = 4
	// maxUnusable is how many connections in a row may close at once or allow no
	// stream before the requests waiting for one fail.
	maxUnusable = 3
)

// Transport is an HTTP/2 client whose pending requests hold no goroutine; see
// the package documentation. Its zero value is ready to use; fields must not
// be changed after the first request.
type Transport struct {
	// TLSClientConfig is used for every connection (nil: defaults, whose system
	// roots honour SSL_CERT_FILE). NextProtos is forced to ["h2", "http/1.1"]
	// on a clone, and ServerName defaults to the URL's host.
	TLSClientConfig *tls.Config

	// Fallback carries what this transport does not: plain http:// URLs, hosts
	// that a proxy from the environment (http.ProxyFromEnvironment) serves,
	// CONNECT, requests with trailers, and servers that do not negotiate h2
	// (that authority is then remembered as HTTP/1 for ten minutes). nil: a
	// clone of http.DefaultTransport using TLSClientConfig.
	Fallback *http.Transport

	// DialTimeout bounds TCP connect, TLS handshake and the server's first
	// SETTINGS frame (default 30s).
	DialTimeout time.Duration
	// ReadIdleTimeout is how long a connection may go without reading any
	// frame before a PING is sent to check it is alive (default 30s).
	ReadIdleTimeout time.Duration
	// PingTimeout is how long an unanswered PING is waited for before the
	// connection is closed and its streams fail (default 15s).
	PingTimeout time.Duration
	// IdleConnTimeout closes a connection that has had no stream for this long
	// (default 90s).
	IdleConnTimeout time.Duration
	// WriteTimeout bounds each batch of frames written to a connection; a
	// write that stalls longer closes the connection (default 30s).
	WriteTimeout time.Duration
	// MaxResponseHeaderBytes limits the decoded size of a response's header
	// list, advertised as SETTINGS_MAX_HEADER_LIST_SIZE (default 10 MiB).
	MaxResponseHeaderBytes int64
	// MaxBodyBytes caps a request body, which Start reads whole (default 64 MiB).
	MaxBodyBytes int64
	// DisableCompression, as in net/http, stops the transport from asking for gzip.
	// Otherwise a request without Accept-Encoding (nor Range, nor HEAD) is sent with
	// "Accept-Encoding: gzip", and a gzip response is decompressed as it is read:
	// its Content-Encoding and Content-Length are removed and Uncompressed is set.
	DisableCompression bool

	initOnce sync.Once
	fallback *http.Transport
	// dialH2, when set (by tests), replaces the TCP dial and TLS handshake: it
	// returns a connection on which h2 is spoken from the client preface on.
	dialH2 func(ctx context.Context, addr string) (net.Conn, error)

	// mu guards every pool, connection and stream of this transport (see the
	// package documentation for why one lock).
	mu    sync.Mutex
	pools map[string]*pool
}

// pool is the set of connections to one authority (host:port) and the
// requests waiting for a free stream slot on one of them.
type pool struct {
	key     string
	conns   []*conn
	waiting []*stream // FIFO; finished streams are skipped lazily
	dialing int
	perConn int       // the last MAX_CONCURRENT_STREAMS seen, to size dials
	h1Until time.Time // until then, the authority is sent to Fallback
	// unusable counts the connections in a row that could carry nothing.
	unusable int
}

var (
	errBodyTooLarge = errors.New("h2async: request body is larger than the transport's limit")
	errNoReplay     = errors.New("h2async: server did not process the request and its body cannot be sent again")
	errTooManyTries = errors.New("h2async: server did not process the request after several attempts")
)

// The server set connections up but they could carry nothing.
var (
	errClosedAtOnce = errors.New("h2async: the server closes every new connection")
	errNoStreams    = errors.New("h2async: the server allows no stream (SETTINGS_MAX_CONCURRENT_STREAMS 0)")
)

// errNotH2 marks a server that did not choose h2 over ALPN.
var errNotH2 = errors.New("h2async: server does not speak HTTP/2")

func (t *Transport) init() {
	t.initOnce.Do(func() {
		t.pools = make(map[string]*pool)
		t.fallback = t.Fallback
		if t.fallback == nil {
			t.fallback = http.DefaultTransport.(*http.Transport).Clone()
			if t.TLSClientConfig != nil {
				t.fallback.TLSClientConfig = t.TLSClientConfig.Clone()
			}
		}
	})
}

// RoundTrip sends req and waits for the response headers; it is Start with a
// waiting caller.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	type result struct {
		resp *http.Response
		err  error
	}
	ch := make(chan result, 1)
	t.Start(req, func(resp *http.Response, err error) { ch <- result{resp, err} })
	r := <-ch
	return r.resp, r.err
}

// Start sends req and calls done exactly once, on a goroutine of its own, with
// the response as soon as its headers arrive (the body still streaming; done's
// receiver must close it) or with the error. The request body is read whole
// before Start returns. Until the headers arrive no goroutine waits for the
// request (except on the Fallback path).
func (t *Transport) Start(req *http.Request, done func(*http.Response, error)) {
	t.init()
	if err := checkRequest(req); err != nil {
		closeBody(req)
		go done(nil, err)
		return
	}
	key := authorityKey(req.URL)
	if t.wantsFallback(req, key) {
		go func() { done(t.fallback.RoundTrip(req)) }()
		return
	}
	body, err := t.readBody(req)
	if err != nil {
		go done(nil, err)
		return
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		go done(nil, err)
		return
	}
	s := newStream(t, req, key, body, done)
	t.mu.Lock()
	defer t.mu.Unlock()
	// AfterFunc adds no goroutine for the standard context types; the function
	// runs (on a goroutine of its own) only if the context ends. It is set
	// under the lock because that function reads s.stop under it.
	s.stop = context.AfterFunc(ctx, func() { t.cancel(s, ctx.Err()) })
	t.assign(s)
}

// CloseIdleConnections closes every connection that carries no stream, here
// and in Fallback.
func (t *Transport) CloseIdleConnections() {
	t.init()
	t.mu.Lock()
	for _, p := range t.pools {
		for _, c := range append([]*conn(nil), p.conns...) {
			if c.reserved == 0 {
				c.close(errors.New("h2async: connection closed as idle"))
			}
		}
	}
	t.mu.Unlock()
	t.fallback.CloseIdleConnections()
}

// checkRequest rejects what no HTTP/2 server could be sent.
func checkRequest(req *http.Request) error {
	if req == nil || req.URL == nil {
		return errors.New("h2async: request has no URL")
	}
	if req.URL.Scheme != "https" && req.URL.Scheme != "http" {
		return fmt.Errorf("h2async: unsupported URL scheme %q", req.URL.Scheme)
	}
	if req.URL.Host == "" {
		return errors.New("h2async: request URL has no host")
	}
	if req.Method != "" && strings.IndexFunc(req.Method, func(r rune) bool { return !httpguts.IsTokenRune(r) }) >= 0 {
		return fmt.Errorf("h2async: invalid method %q", req.Method)
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("h2async: invalid header name %q", k)
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Errorf("h2async: invalid value for header %q", k)
			}
		}
	}
	return nil
}

// wantsFallback reports whether req is one this transport hands to Fallback.
func (t *Transport) wantsFallback(req *http.Request, key string) bool {
	if req.URL.Scheme == "http" || req.Method == http.MethodConnect || len(req.Trailer) > 0 {
		return true
	}
	if u, err := http.ProxyFromEnvironment(req); u != nil || err != nil {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.pools[key]
	return p != nil && time.Now().Before(p.h1Until)
}

// readBody reads and closes req.Body, so the request can be sent (and sent
// again) without touching the caller's reader later.
func (t *Transport) readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	defer req.Body.Close()
	return readCapped(req.Body, req.ContentLength, t.maxBodyBytes())
}

func readCapped(r io.Reader, declared, limit int64) ([]byte, error) {
	if declared > limit {
		return nil, errBodyTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("h2async: reading request body: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, errBodyTooLarge
	}
	return b, nil
}

func closeBody(req *http.Request) {
	if req != nil && req.Body != nil {
		req.Body.Close()
	}
}

// authorityKey is host:port, the pool a URL's requests share.
func authorityKey(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "443"
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// assign puts s on a connection with a free stream slot, or queues it and
// dials. Caller holds t.mu.
func (t *Transport) assign(s *stream) {
	if s.finished {
		return
	}
	p := t.pools[s.key]
	if p == nil {
		p = &pool{key: s.key, perConn: 100}
		t.pools[s.key] = p
	}
	if c := p.available(); c != nil {
		c.add(s)
		return
	}
	p.waiting = append(p.waiting, s)
	t.maybeDial(p)
}

// available returns a connection that can take one more stream, or nil.
func (p *pool) available() *conn {
	for _, c := range p.conns {
		if c.canTake() {
			return c
		}
	}
	return nil
}

// drain moves waiting streams onto connections with free slots. Caller holds t.mu.
func (t *Transport) drain(p *pool) {
	for len(p.waiting) > 0 {
		s := p.waiting[0]
		if !s.finished {
			c := p.available()
			if c == nil {
				t.maybeDial(p)
				return
			}
			c.add(s)
		}
		p.waiting[0] = nil
		p.waiting = p.waiting[1:]
	}
	p.waiting = nil
}

// maybeDial starts enough dials (each on a goroutine of its own, one per
// connection, not per request) to seat the waiting streams. Caller holds t.mu.
func (t *Transport) maybeDial(p *pool) {
	per := max(p.perConn, 1)
	want := min((len(p.waiting)+per-1)/per, maxParallelDials)
	for p.dialing < want {
		p.dialing++
		go t.dial(p)
	}
}

// dial opens one connection to p's authority and seats waiting streams on it.
func (t *Transport) dial(p *pool) {
	c, err := t.dialConn(p)
	t.mu.Lock()
	defer t.mu.Unlock()
	p.dialing--
	switch {
	case errors.Is(err, errNotH2):
		p.h1Until = time.Now().Add(h1Memory)
		for _, s := range p.waiting {
			if !s.finished {
				t.finishViaFallback(s)
			}
		}
		p.waiting = nil
	case err != nil:
		if p.dialing == 0 && !p.hasLiveConn() {
			for _, s := range p.waiting {
				t.finish(s, nil, err)
			}
			p.waiting = nil
		}
	case c.closed:
		t.unusable(p, errClosedAtOnce)
	case c.maxStreams == 0:
		c.close(errNoStreams)
		t.unusable(p, errNoStreams)
	default:
		p.unusable = 0
		c.registered = true
		p.conns = append(p.conns, c)
		p.perConn = c.maxStreams
		t.drain(p)
		if c.reserved == 0 {
			c.becameIdle()
		}
	}
}

// unusable counts a connection the server set up but that could carry nothing (it
// closed at once, or allows no stream). From the third in a row, the requests
// waiting fail with err when no other connection can take them, instead of dialling
// again for as long as their contexts last; until a usable connection comes, each
// new request gets one more dial. Caller holds t.mu.
func (t *Transport) unusable(p *pool, err error) {
	if p.unusable++; p.unusable < maxUnusable || p.hasLiveConn() {
		t.drain(p)
		return
	}
	for _, s := range p.waiting {
		t.finish(s, nil, err)
	}
	p.waiting = nil
}

func (p *pool) hasLiveConn() bool {
	for _, c := range p.conns {
		if !c.closed && !c.goAway {
			return true
		}
	}
	return false
}

func (p *pool) remove(c *conn) {
	for i, x := range p.conns {
		if x == c {
			p.conns = append(p.conns[:i], p.conns[i+1:]...)
			return
		}
	}
}

// finishViaFallback sends a request that was queued for h2 to Fallback
// instead, with its already-read body. Caller holds t.mu.
func (t *Transport) finishViaFallback(s *stream) {
	s.finished = true
	s.stop()
	req := s.req.Clone(s.req.Context())
	body := s.sendBody
	req.ContentLength = int64(len(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	req.Body, _ = req.GetBody()
	if len(body) == 0 {
		req.Body = http.NoBody
	}
	orig, done, fb := s.req, s.done, t.fallback
	go func() {
		resp, err := fb.RoundTrip(req)
		if resp != nil {
			resp.Request = orig
		}
		done(resp, err)
	}()
}

// finish calls s.done with the outcome unless it has been called. Caller holds t.mu.
func (t *Transport) finish(s *stream, resp *http.Response, err error) {
	if s.finished {
		return
	}
	s.finished = true
	if err != nil {
		s.stop()
		s.sendBody = nil
	}
	go s.done(resp, err)
}

// requeue sends again a stream that its server did not process (above a
// GOAWAY's last stream id, or refused); counted says whether this counts as one
// of its maxAttempts. Caller holds t.mu; s is detached.
func (t *Transport) requeue(s *stream, counted bool) {
	s.conn, s.id, s.dead, s.endSent = nil, 0, false, false
	if counted {
		s.attempts++
	}
	if s.finished {
		return
	}
	if s.attempts >= maxAttempts {
		t.finish(s, nil, errTooManyTries)
		return
	}
	if s.bodyTaken && s.bodyLen > 0 {
		if s.req.GetBody == nil {
			t.finish(s, nil, errNoReplay)
			return
		}
		// GetBody is the caller's code and may block: read it off the lock.
		go t.replay(s)
		return
	}
	t.assign(s)
}

func (t *Transport) replay(s *stream) {
	var body []byte
	rc, err := s.req.GetBody()
	if err == nil {
		body, err = readCapped(rc, int64(s.bodyLen), t.maxBodyBytes())
		rc.Close()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.finish(s, nil, fmt.Errorf("h2async: replaying request body: %w", err))
		return
	}
	s.sendBody, s.bodyTaken = body, false
	t.assign(s)
}

// cancel ends s because its request's context ended.
func (t *Transport) cancel(s *stream, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := s.conn
	if s.resp == nil {
		if s.finished {
			return
		}
		t.finish(s, nil, err)
	} else {
		s.mu.Lock()
		over := s.bodyDone || s.bodyClosed || s.eof || s.err != nil
		if !over {
			s.err = err
			s.cond.Broadcast()
		}
		s.mu.Unlock()
		if over {
			return
		}
	}
	if c != nil {
		c.resetStream(s)
	}
}

func (t *Transport) dialTimeout() time.Duration { return orDefault(t.DialTimeout, defaultDialTimeout) }
func (t *Transport) readIdleTimeout() time.Duration {
	return orDefault(t.ReadIdleTimeout, defaultReadIdleTimeout)
}
func (t *Transport) pingTimeout() time.Duration { return orDefault(t.PingTimeout, defaultPingTimeout) }
func (t *Transport) idleConnTimeout() time.Duration {
	return orDefault(t.IdleConnTimeout, defaultIdleConnTimeout)
}
func (t *Transport) writeTimeout() time.Duration {
	return orDefault(t.WriteTimeout, defaultWriteTimeout)
}
func (t *Transport) maxHeaderBytes() int64 {
	return orDefault(t.MaxResponseHeaderBytes, defaultMaxHeaderBytes)
}
func (t *Transport) maxBodyBytes() int64 { return orDefault(t.MaxBodyBytes, defaultMaxBodyBytes) }

func orDefault[T time.Duration | int64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// tlsConfig is TLSClientConfig (or defaults) forced to offer h2.
func (t *Transport) tlsConfig(host string) *tls.Config {
	cfg := &tls.Config{}
	if t.TLSClientConfig != nil {
		cfg = t.TLSClientConfig.Clone()
	}
	cfg.NextProtos = []string{"h2", "http/1.1"}
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	return cfg
}
