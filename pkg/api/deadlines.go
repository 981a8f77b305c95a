package api

import (
	"context"
	"net/http"
	"strings"
	"time"
)

// answerMargin is the time a non-streaming answer has to be written once the job's
// wait (SyncWait) is over.
const answerMargin = 30 * time.Second

// streamEndMargin is the time a stream that has reached SSEMaxDuration has to end.
const streamEndMargin = 10 * time.Second

// deadlines sets each request's connection deadlines (a zero timeout sets none):
//
//   - a body must arrive within BodyTimeout (UploadTimeout for a multipart upload).
//     net/http lifts the read deadline once the body has been read (its watch for
//     the client hanging up starts then), so a long wait is not cut short; a
//     request without a body gets no read deadline, as that watch is already on;
//   - a non-streaming answer must be written within the body's time plus SyncWait
//     plus answerMargin. Streams replace this with their own policy (stream).
func (s *Server) deadlines(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		body := s.BodyTimeout
		if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") {
			body = s.UploadTimeout
		}
		if body > 0 && r.Body != nil && r.Body != http.NoBody {
			rc.SetReadDeadline(time.Now().Add(body))
		}
		if body > 0 && s.SyncWait > 0 {
			rc.SetWriteDeadline(time.Now().Add(body + s.SyncWait + answerMargin))
		}
		next.ServeHTTP(w, r)
	})
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

// extendWrite gives a long response (a file's content) UploadTimeout to be written.
func (s *Server) extendWrite(w http.ResponseWriter) {
	if s.UploadTimeout > 0 {
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.UploadTimeout))
	}
}
