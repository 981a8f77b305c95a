package ingress

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// connGate bounds the connections that have not yet carried an authenticated request:
// a connection counts from the moment it is accepted until a request on it is
// authenticated (or it closes). The gate holds at most max such connections, and one
// source (an IPv4 address, an IPv6 /64) at most perSource of them, so one client fills
// only its own share and other addresses' new connections are still served. A
// connection accepted past either bound is closed at once, before anything is read
// from it; a counted connection left idle (keep-alive, after keyless requests) for
// idle is closed. Connections that authenticated are not limited here (the tenant
// limits apply).
type connGate struct {
	max, perSource int
	idle           time.Duration

	mu      sync.Mutex
	pending int            // connections counted
	sources map[string]int // connections counted per source
	conns   sync.Map       // net.Conn → *gateConn
}

// gateConn is one connection's standing with its gate.
type gateConn struct {
	gate    *connGate
	source  string
	counted atomic.Bool   // counted in gate.pending
	turn    atomic.Uint64 // its state changes: an idle close is for the idle period it began in
}

type gateConnKey struct{}

func newConnGate(max, perSource int, idle time.Duration) *connGate {
	if perSource <= 0 || perSource > max {
		perSource = max
	}
	return &connGate{max: max, perSource: perSource, idle: idle, sources: map[string]int{}}
}

// connContext gives each connection's requests their gateConn (http.Server.ConnContext).
func (g *connGate) connContext(ctx context.Context, c net.Conn) context.Context {
	gc := &gateConn{gate: g, source: sourceOf(c.RemoteAddr())}
	g.conns.Store(c, gc)
	return context.WithValue(ctx, gateConnKey{}, gc)
}

// sourceOf is the source a connection counts against: its IPv4 address, or the /64
// of its IPv6 address (one host commonly holds a whole /64).
func sourceOf(a net.Addr) string {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return a.String()
	}
	ip := ap.Addr().Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// connState counts a new connection and closes it when the gate or its source's share
// is full, closes a counted connection left idle, and forgets a closed or hijacked one
// (http.Server.ConnState).
func (g *connGate) connState(c net.Conn, st http.ConnState) {
	v, ok := g.conns.Load(c)
	if !ok {
		return
	}
	gc := v.(*gateConn)
	turn := gc.turn.Add(1)
	switch st {
	case http.StateNew:
		if !g.take(gc) {
			// A short write deadline: the 503 goes out or is dropped, never waits.
			c.SetWriteDeadline(time.Now().Add(time.Second))
			c.Write(gateFull)
			c.Close()
		}
	case http.StateIdle:
		if g.idle > 0 && gc.counted.Load() {
			time.AfterFunc(g.idle, func() {
				if gc.turn.Load() == turn && gc.counted.Load() {
					c.Close() // still idle, still without a key
				}
			})
		}
	case http.StateClosed, http.StateHijacked:
		gc.release()
		g.conns.Delete(c)
	}
}

// take counts gc, if the gate and its source's share have room.
func (g *connGate) take(gc *gateConn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending >= g.max || g.sources[gc.source] >= g.perSource {
		return false
	}
	g.pending++
	g.sources[gc.source]++
	gc.counted.Store(true)
	return true
}

// gateFull is the answer of a connection over the gate's bound, written before its
// request is read.
var gateFull = func() []byte {
	body := `{"error":{"message":"Too many connections without an API key; retry shortly.","type":"server_error","param":null,"code":"overloaded"}}`
	return fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}()

// release stops counting the connection (once).
func (gc *gateConn) release() {
	if !gc.counted.Swap(false) {
		return
	}
	g := gc.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pending--
	if g.sources[gc.source]--; g.sources[gc.source] <= 0 {
		delete(g.sources, gc.source)
	}
}

// authenticated records that a request of r's connection was authenticated: the
// connection no longer counts against the gate.
func authenticated(r *http.Request) {
	if gc, ok := r.Context().Value(gateConnKey{}).(*gateConn); ok {
		gc.release()
	}
}

// HTTPServer returns the ingress's http.Server: s.Handler() with the header and idle
// deadlines (body, answer and stream deadlines are set per request: deadlines), and,
// when MaxUnauthenticatedConns is positive, the bound on connections that have not
// authenticated (connGate). Its Shutdown closes the Responses WebSockets.
func (s *Server) HTTPServer(headerTimeout, idleTimeout time.Duration) *http.Server {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: headerTimeout, IdleTimeout: idleTimeout}
	srv.RegisterOnShutdown(s.sockets.Close) // Shutdown does not wait for hijacked connections
	if s.MaxUnauthenticatedConns > 0 {
		g := newConnGate(s.MaxUnauthenticatedConns, s.MaxUnauthenticatedConnsPerSource, s.UnauthenticatedIdle)
		srv.ConnContext, srv.ConnState = g.connContext, g.connState
	}
	return srv
}
