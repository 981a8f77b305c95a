package llm

import (
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
)

// AsyncTransport is an http.RoundTripper that can also send a request with no goroutine
// waiting for its answer (internal/h2async.Transport).
type AsyncTransport interface {
	http.RoundTripper
	// Start sends req and calls done exactly once, on a goroutine of its own (done may
	// block, e.g. read the body), with the response as soon as its headers arrive (the
	// body still streaming; done's receiver closes it) or with the error.
	Start(req *http.Request, done func(*http.Response, error))
}

// SendFunc sends one request with hc and calls done exactly once with what hc.Do
// would return. The callers take one so that Complete and Start share every line of
// their protocol: Complete passes Do, Start passes Send.
type SendFunc func(hc *http.Client, req *http.Request, done func(*http.Response, error))

// Do is hc.Do as a SendFunc: done runs on the calling goroutine before Do returns, which
// is what Complete promises (onDelta on the calling goroutine).
func Do(hc *http.Client, req *http.Request, done func(*http.Response, error)) {
	done(hc.Do(req))
}

// Send sends req with hc's AsyncTransport when it has one, so that no goroutine waits
// for the answer: done runs on the transport's goroutine once the headers arrive.
// Otherwise it is Do. Either way done gets what hc.Do would give: a transport error
// wrapped in *url.Error, so callers word (and redact) it the same on both paths.
//
// A client with a Timeout is always sent with Do: http.Client enforces Timeout over
// the headers and the whole body with a timer and a body wrapper of its own, which the
// transport's Start bypasses; the async path leaves deadlines to ctx, as the chat
// worker sets them. The async path also follows no redirects and uses no cookie jar
// (a model endpoint answers a POST itself).
func Send(hc *http.Client, req *http.Request, done func(*http.Response, error)) {
	at, ok := hc.Transport.(AsyncTransport)
	if !ok || hc.Timeout != 0 {
		Do(hc, req, done)
		return
	}
	at.Start(req, func(resp *http.Response, err error) {
		// This goroutine is the transport's: no consumer's recover is above it. A
		// panic while reading the answer (a decoder's bug) must not take the process
		// down with every other call in flight; it is logged, and the caller's step,
		// which never hears back, is retried by its guard (chat.Worker.guard).
		defer func() {
			if p := recover(); p != nil {
				slog.Error("llm: reading a model's answer panicked", "url", req.URL.Redacted(), "panic", p, "stack", string(debug.Stack()))
			}
		}()
		if err != nil {
			err = &url.Error{Op: urlOp(req.Method), URL: req.URL.Redacted(), Err: err}
		}
		done(resp, err)
	})
}

// urlOp is the Op http.Client gives its *url.Error: "Post" for POST.
func urlOp(method string) string {
	if method == "" {
		return "Get"
	}
	return method[:1] + strings.ToLower(method[1:])
}
