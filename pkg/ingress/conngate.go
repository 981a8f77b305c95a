package ingress

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// connGate bounds the connections that have not yet carried an authenticated request:
// a connection counts from the moment it is accepted until a request on it is
// authenticated (or it closes). A connection accepted while max are counted is closed
// at once, before anything is read from it, so clients that never authenticate (or
// never finish their headers) cannot take more than max of the server's connections;
// connections that authenticated are not limited here (the tenant limits apply).
type connGate struct {
	max     int64
	pending atomic.Int64 // connections counted
	conns   sync.Map     // net.Conn → *gateConn
}

// gateConn is one connection's standing with its gate.
type gateConn struct {
	gate    *connGate
	counted atomic.Bool // counted in gate.pending
}

type gateConnKey struct{}

// connContext gives each connection's requests their gateConn (http.Server.ConnContext).
func (g *connGate) connContext(ctx context.Context, c net.Conn) context.Context {
	gc := &gateConn{gate: g}
	g.conns.Store(c, gc)
	return context.WithValue(ctx, gateConnKey{}, gc)
}

// connState counts a new connection and closes it when the gate is full; a closed or
// hijacked connection is forgotten (http.Server.ConnState).
func (g *connGate) connState(c net.Conn, st http.ConnState) {
	v, ok := g.conns.Load(c)
	if !ok {
		return
	}
	gc := v.(*gateConn)
	switch st {
	case http.StateNew:
		gc.counted.Store(true)
		if g.pending.Add(1) > g.max {
			gc.release()
			// A short write deadline: the 503 goes out or is dropped, never waits.
			c.SetWriteDeadline(time.Now().Add(time.Second))
			c.Write(gateFull)
			c.Close()
		}
	case http.StateClosed, http.StateHijacked:
		gc.release()
		g.conns.Delete(c)
	}
}

// gateFull is the answer of a connection over the gate's bound, written before its
// request is read.
var gateFull = func() []byte {
	body := `{"error":{"message":"Too many connections without an API key; retry shortly.","type":"server_error","param":null,"code":"overloaded"}}`
	return fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}()

// release stops counting the connection (once).
func (gc *gateConn) release() {
	if gc.counted.Swap(false) {
		gc.gate.pending.Add(-1)
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
		g := &connGate{max: int64(s.MaxUnauthenticatedConns)}
		srv.ConnContext, srv.ConnState = g.connContext, g.connState
	}
	return srv
}
