// Package h2async is an HTTP/2 client in which a request waiting for its answer
// holds no goroutine.
//
// # Why
//
// net/http spends two goroutines on every pending HTTP/2 request: the caller
// blocked in RoundTrip and the transport's own per-request goroutine. Their
// stacks plus the request's heap come to roughly 17 KB, so ten thousand model
// calls waiting on slow providers cost ~170 MB before any answer arrives. Here
// a pending request is a small struct (its body until sent, its header
// fields, flow-control counters); the response callback gets a fresh goroutine
// only once the response headers have arrived.
//
// # Design
//
// Each connection has exactly two goroutines: a reader, which decodes frames
// and updates stream state, and a writer, which drains queues of control
// frames, request HEADERS and body DATA (as far as the peer's flow-control
// windows allow). Nothing blocks on behalf of a single request: a body larger
// than the window simply stays queued until a WINDOW_UPDATE lets the writer
// continue; a cancelled context is noticed through context.AfterFunc; PING
// keepalive and idle close run on time.AfterFunc timers.
//
// All connection and stream state of a Transport sits behind one mutex. That
// trades some parallelism (frames of different connections are processed one
// at a time) for a state machine that is easy to reason about: a stream moves
// between the pool's wait queue, a connection's header queue and its stream
// table without any lock ordering to get wrong. The one exception is a response
// body's buffer, which has a lock of its own (taken after the transport's, never
// before): a caller reading its answer takes the transport's lock only to give
// back flow-control window, once per 256 KiB read, so thousands of streamed
// answers read at once do not queue behind every connection's reader.
//
// When every connection to an authority is at its SETTINGS_MAX_CONCURRENT_STREAMS
// limit, requests wait in a per-authority queue (still no goroutine) and more
// connections are dialled, a few at a time. Requests a server did not process
// (above a GOAWAY's last stream id, or refused) are sent again on another
// connection; a body already sent is replayed through Request.GetBody.
//
// # What falls back to Transport.Fallback
//
// Plain http:// URLs, requests that a proxy from the environment
// (http.ProxyFromEnvironment) would carry, CONNECT requests, requests with
// trailers, and servers that do not negotiate "h2" over ALPN (such an
// authority is then remembered as HTTP/1 for ten minutes). On that path a
// goroutine does wait for each request, exactly as with net/http.
//
// # Not done
//
// Request trailers are not sent (such requests fall back), server push is
// refused (SETTINGS_ENABLE_PUSH is 0; a PUSH_PROMISE closes the connection), and
// the peer's SETTINGS_MAX_HEADER_LIST_SIZE is not enforced on outgoing headers.
// Like net/http, a request without Accept-Encoding asks for gzip and its
// response is decompressed transparently (see Transport.DisableCompression).
package h2async
