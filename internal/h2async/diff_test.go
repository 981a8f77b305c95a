package h2async

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestDifferential sends the same requests through h2async and through net/http to
// the same server (Go's, nginx, Node's, h2o) and wants the same outcome from both: status,
// headers, body, and the kind of any error (on the request or while reading the body).
func TestDifferential(t *testing.T) {
	servers := []struct {
		name  string
		start func(testing.TB) *testServer
	}{{"go", goServer}, {"nginx", nginxServer}, {"node", nodeServer}, {"h2o", h2oServer}}
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			if testing.Short() && srv.name != "go" {
				t.Skip("starts nginx and node")
			}
			s := srv.start(t)
			ours, theirs := s.h2async(t), s.nethttp(t)
			for _, st := range diffSteps(t) {
				t.Run(st.name, func(t *testing.T) {
					got, want := st.run(s, ours), st.run(s, theirs)
					if !reflect.DeepEqual(got, want) {
						t.Errorf("h2async and net/http differ:\nh2async:  %s\nnet/http: %s", got, want)
					}
					if st.want != nil && !(st.cut && s.cutsCleanly) && !st.want(got) {
						t.Errorf("both clients observed the wrong outcome: %s", got)
					}
				})
			}
		})
	}
}

// diffStep is one request of the sequence.
type diffStep struct {
	name   string
	method string
	path   string // on the server; an absolute URL is used as it is
	body   []byte
	header http.Header
	// timeout bounds the whole exchange (headers and body); cancel ends the
	// context before the request is sent.
	timeout time.Duration
	cancel  bool
	// want, if set, is what both clients must observe (so that two equal
	// outcomes are also the right one).
	want func(diffOutcome) bool
	// cut: the server cuts the response (want does not hold where it ends a cut
	// response cleanly).
	cut bool
}

// diffOutcome is what a caller of RoundTrip observes.
type diffOutcome struct {
	Err           string
	Status        string
	Proto         string
	Header        http.Header
	ContentLength int64
	Uncompressed  bool
	Body          string
	BodyErr       string
}

func (o diffOutcome) String() string {
	body := o.Body
	if len(body) > 80 {
		body = fmt.Sprintf("%.80q… (%d bytes)", body, len(body))
	} else {
		body = fmt.Sprintf("%q", body)
	}
	return fmt.Sprintf("err=%q status=%q proto=%s cl=%d uncompressed=%v body=%s bodyErr=%q header=%v",
		o.Err, o.Status, o.Proto, o.ContentLength, o.Uncompressed, body, o.BodyErr, o.Header)
}

func diffSteps(t testing.TB) []diffStep {
	closed := freePort(t) // nothing listens there
	big := pattern(1<<20 + 3)
	return []diffStep{
		{name: "GET", method: "GET", path: "/status?code=200"},
		{name: "POST JSON", method: "POST", path: "/echo", body: []byte(`{"model":"m","stream":true}`), header: http.Header{"Content-Type": {"application/json"}}},
		{name: "PUT 1 MiB", method: "PUT", path: "/echo", body: big},
		{name: "PATCH empty", method: "PATCH", path: "/echo"},
		{name: "DELETE 204", method: "DELETE", path: "/status?code=204"},
		{name: "HEAD", method: "HEAD", path: "/bytes?n=100"},
		{name: "304", method: "GET", path: "/status?code=304"},
		{name: "404", method: "GET", path: "/status?code=404"},
		{name: "POST 500", method: "POST", path: "/status?code=500", body: []byte("x")},
		{name: "503 Retry-After", method: "GET", path: "/status?code=503"},
		{name: "headers", method: "GET", path: "/headers", header: http.Header{"X-One": {"a"}, "X-Two": {"b", "c"}, "Authorization": {"Bearer k"}}},
		{name: "SSE", method: "GET", path: "/sse?n=5"},
		{name: "gzip transparent", method: "GET", path: "/text?n=500"},
		{name: "gzip asked for", method: "GET", path: "/text?n=500", header: http.Header{"Accept-Encoding": {"gzip"}}},
		{name: "identity asked for", method: "GET", path: "/text?n=500", header: http.Header{"Accept-Encoding": {"identity"}}},
		{name: "range", method: "GET", path: "/text?n=500", header: http.Header{"Range": {"bytes=0-9"}}},
		{name: "reset mid-body", method: "GET", path: "/abort?after=1000", cut: true,
			want: func(o diffOutcome) bool { return o.Err == "" && o.BodyErr != "" }},
		{name: "timeout before headers", method: "GET", path: "/slow?ms=5000", timeout: 300 * time.Millisecond,
			want: func(o diffOutcome) bool { return o.Err == "deadline exceeded" }},
		{name: "timeout mid-body", method: "GET", path: "/stall", timeout: 500 * time.Millisecond,
			want: func(o diffOutcome) bool { return o.Body == "data: first\n\n" && o.BodyErr == "deadline exceeded" }},
		{name: "canceled", method: "GET", path: "/status?code=200", cancel: true,
			want: func(o diffOutcome) bool { return o.Err == "canceled" }},
		{name: "connection refused", method: "GET", path: fmt.Sprintf("https://127.0.0.1:%d/", closed),
			want: func(o diffOutcome) bool { return o.Err == "dial" }},
		{name: "not found", method: "GET", path: "/nowhere"},
	}
}

func (st diffStep) run(s *testServer, rt http.RoundTripper) diffOutcome {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	if st.timeout > 0 {
		cancel()
		ctx, cancel = context.WithTimeout(context.Background(), st.timeout)
	}
	defer cancel()
	if st.cancel {
		cancel()
	}
	url := st.path
	if !strings.HasPrefix(url, "https://") {
		url = s.url + st.path
	}
	var body io.Reader
	if st.body != nil {
		body = bytes.NewReader(st.body)
	}
	req, err := http.NewRequestWithContext(ctx, st.method, url, body)
	if err != nil {
		return diffOutcome{Err: err.Error()}
	}
	for k, vv := range st.header {
		req.Header[k] = vv
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return diffOutcome{Err: errKind(err)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	h := resp.Header.Clone()
	h.Del("Date") // differs between two requests
	h.Del("X-Session")
	return diffOutcome{Status: resp.Status, Proto: resp.Proto, Header: h, ContentLength: resp.ContentLength,
		Uncompressed: resp.Uncompressed, Body: string(b), BodyErr: errKind(err)}
}

// errKind names what a caller can act on in err: a deadline, a cancellation, a
// stream reset with its code, a refused dial, a cut body; messages differ between
// the two clients and are not compared.
func errKind(err error) string {
	var op *net.OpError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline exceeded"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &op) && op.Op == "dial":
		return "dial"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected EOF"
	}
	if code, ok := streamErrCode(err); ok {
		return "stream reset: " + code.String()
	}
	return "other: " + err.Error()
}

// streamErrCode finds a stream error in err's chain: x/net's http2.StreamError, or
// the copy bundled into net/http (an unexported type with the same fields).
func streamErrCode(err error) (http2.ErrCode, bool) {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if se, ok := e.(http2.StreamError); ok {
			return se.Code, true
		}
		v := reflect.ValueOf(e)
		if v.Kind() == reflect.Struct && v.Type().Name() == "http2StreamError" {
			return http2.ErrCode(v.FieldByName("Code").Uint()), true
		}
	}
	return 0, false
}
