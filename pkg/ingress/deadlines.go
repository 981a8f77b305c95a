package ingress

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// answerMargin is the time a non-streaming answer has to be written once the job's
// wait (SyncWait) is over.
const answerMargin = 30 * time.Second

// streamEndMargin is the time a stream that has reached SSEMaxDuration has to end.
const streamEndMargin = 10 * time.Second

// deadlines sets each request's connection deadlines (a zero timeout sets none):
//
//   - a body must arrive within BodyTimeout, whatever its Content-Type and route: only
//     the upload route, once authenticated, extends it to UploadTimeout (upload).
//     net/http lifts the read deadline once the body has been read (its watch for
//     the client hanging up starts then), so a long wait is not cut short; a
//     request without a body gets no read deadline, as that watch is already on;
//   - a non-streaming answer must be written within the body's time plus SyncWait
//     plus answerMargin. Streams replace this with their own policy (stream);
//   - a request answered without its body having been read (a 401, 404, 415, 429, or
//     /healthz with a body) is answered at once and its connection closed: net/http
//     would otherwise read the unread body before writing the answer, and a client
//     that sends its body slowly, or never, would hold the answer and the connection
//     for the whole body deadline.
func (s *Server) deadlines(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		hasBody := r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
		if s.BodyTimeout > 0 && hasBody {
			rc.SetReadDeadline(time.Now().Add(s.BodyTimeout))
		}
		if s.BodyTimeout > 0 && s.SyncWait > 0 {
			rc.SetWriteDeadline(time.Now().Add(s.BodyTimeout + s.SyncWait + answerMargin))
		}
		if !hasBody {
			next.ServeHTTP(w, r)
			return
		}
		// r is the request net/http holds (the mux sets its Pattern for observe), so
		// its Body is replaced in place.
		body := &watchedBody{ReadCloser: r.Body}
		r.Body = body
		next.ServeHTTP(w, r)
		if !body.done.Load() && !body.started.Load() {
			// The read that drains the rest fails at once: the answer is written
			// with "Connection: close" and the connection closed. A body the handler
			// began to read (one refused as too large, say) is left to net/http,
			// which answers before it closes: closing under a client still sending
			// resets the connection, and the client would lose the answer.
			rc.SetReadDeadline(time.Now())
		}
	})
}

// watchedBody records that a request body was read from, and read to its end.
type watchedBody struct {
	io.ReadCloser
	started, done atomic.Bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	b.started.Store(true)
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.done.Store(true)
	}
	return n, err
}

// upload gives an authenticated upload (POST /v1/files) UploadTimeout to send its body
// and the same again for its answer. Routes are authenticated before any body is read,
// and every other request keeps BodyTimeout, so no unauthenticated request, and no
// request to another route, can hold a connection for an upload's time.
func (s *Server) upload(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.UploadTimeout > 0 {
			rc := http.NewResponseController(w)
			rc.SetReadDeadline(time.Now().Add(s.UploadTimeout))
			rc.SetWriteDeadline(time.Now().Add(s.UploadTimeout + answerMargin))
		}
		h(w, r)
	}
}

// stream applies the server-sent event policy to a response about to stream: the
// answer's write deadline is replaced by SSEMaxDuration, and the returned context
// ends the stream then (the caller's keep-alive comments keep proxies from cutting it
// sooner); a client that stops reading is cut off shortly after. cancel must be
// called.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) (context.Context, context.CancelFunc) {
	rc := http.NewResponseController(w)
	if s.SSEMaxDuration <= 0 {
		rc.SetWriteDeadline(time.Time{})
		return context.WithCancel(r.Context())
	}
	// The connection's deadline comes a little after the stream's, so a stream that
	// reaches its end still closes cleanly.
	rc.SetWriteDeadline(time.Now().Add(s.SSEMaxDuration + streamEndMargin))
	return context.WithTimeout(r.Context(), s.SSEMaxDuration)
}

// openStream takes one of tenant's open-stream slots (refused in codec's shape: !ok)
// and bounds the stream at SSEMaxDuration; done ends the bound and frees the slot.
func (s *Server) openStream(w http.ResponseWriter, r *http.Request, codec wire.ClientCodec, tenant string) (ctx context.Context, done func(), ok bool) {
	release, ok := s.admitWait(w, r, codec, tenant, holdStream)
	if !ok {
		return nil, nil, false
	}
	ctx, cancel := s.stream(w, r)
	return ctx, func() { cancel(); release() }, true
}

// extendWrite gives a long response (a file's content) UploadTimeout to be written.
func (s *Server) extendWrite(w http.ResponseWriter) {
	if s.UploadTimeout > 0 {
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.UploadTimeout))
	}
}
