package engines

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	redactpkg "github.com/searchfleet/searchfleet/internal/redact"
)

// maxBody bounds what we read from a provider: grounded answers with many results
// reach a few hundred KB (the largest recording is 275 KB); 16 MB is generous.
const maxBody = 16 << 20

// client is what every HTTP engine kind embeds: the engine id, the HTTP client, the
// base URL and the API key, plus a way to talk JSON that turns failures into *Error.
type client struct {
	id      string
	hc      *http.Client
	baseURL string // no trailing slash
	key     string // never logged, never put in an error
}

func newClient(cfg Config, hc *http.Client, defaultBase string) client {
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = defaultBase
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	return client{id: cfg.ID, hc: hc, baseURL: base, key: cfg.APIKey}
}

// request describes one HTTP call.
type request struct {
	method string
	path   string // appended to baseURL; may carry a query string
	header http.Header
	body   any // marshalled as JSON when non-nil
}

// do sends req and returns the 2xx body. A non-2xx answer becomes an *Error classified
// by status and body, with the API key redacted from its message.
func (c *client) do(ctx context.Context, req request) ([]byte, http.Header, error) {
	var rd io.Reader
	if req.body != nil {
		b, err := json.Marshal(req.body)
		if err != nil {
			return nil, nil, &Error{Kind: BadRequest, Engine: c.id, Message: "encoding request: " + err.Error()}
		}
		rd = bytes.NewReader(b)
	}
	method := req.method
	if method == "" {
		method = http.MethodPost
	}
	hr, err := http.NewRequestWithContext(ctx, method, c.baseURL+req.path, rd)
	if err != nil {
		return nil, nil, &Error{Kind: BadRequest, Engine: c.id, Message: c.redact(err.Error())}
	}
	for k, vs := range req.header {
		hr.Header[k] = vs
	}
	if req.body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	hr.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(hr)
	if err != nil {
		return nil, nil, c.transportError(ctx, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, nil, c.transportError(ctx, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, resp.Header, c.statusError(resp.StatusCode, resp.Header, body)
	}
	return body, resp.Header, nil
}

// doJSON is do followed by decoding the body into out.
func (c *client) doJSON(ctx context.Context, req request, out any) error {
	body, _, err := c.do(ctx, req)
	if err != nil {
		return err
	}
	return c.decode(body, out)
}

// decode unmarshals a 2xx body, turning failure into a Decode error.
func (c *client) decode(body []byte, out any) error {
	if err := json.Unmarshal(body, out); err != nil {
		return &Error{Kind: Decode, Engine: c.id, Message: "reading response: " + truncate(err.Error(), 200)}
	}
	return nil
}

func (c *client) redact(s string) string { return redact(s, c.key) }

func (c *client) transportError(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return AsError(c.id, ctxErr)
	}
	// The message says what failed in stable words, without the engine's address;
	// the transport's error is kept in Err for the log, with the URL's query values
	// hidden (they carry the user's search query, and for some kinds the key).
	var ue *url.Error
	if errors.As(err, &ue) {
		err = &url.Error{Op: ue.Op, URL: redactpkg.Query(ue.URL), Err: ue.Err}
	}
	return &Error{Kind: Unavailable, Engine: c.id, Message: netReason(err), Err: redactedError{msg: c.redact(err.Error()), err: err}}
}

// netReason words a transport failure for people, naming no address.
func netReason(err error) string {
	var dns *net.DNSError
	var ne net.Error
	switch {
	case errors.As(err, &dns):
		return "the engine's host name did not resolve"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the engine refused the connection"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the connection to the engine was cut"
	case errors.As(err, &ne) && ne.Timeout():
		return "the engine did not answer in time"
	}
	return "the engine could not be reached"
}

// redactedError is a transport error whose text has its secrets removed; it still
// unwraps to the original, so errors.Is and errors.As see the cause.
type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }

// statusError classifies a non-2xx answer.
func (c *client) statusError(status int, h http.Header, body []byte) *Error {
	e := &Error{Engine: c.id, Status: status, Message: c.redact(truncate(errorMessage(body), 300))}
	switch {
	case status == http.StatusTooManyRequests:
		e.Kind = RateLimited
		if quotaBody(body) {
			e.Kind = Quota
		}
	case status == http.StatusPaymentRequired:
		e.Kind = Quota
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		e.Kind = Auth
	case status == http.StatusRequestTimeout || status >= 500:
		e.Kind = Unavailable // includes Anthropic's 529 overloaded
	default:
		e.Kind = BadRequest
	}
	if e.Kind == RateLimited || e.Kind == Unavailable {
		e.RetryAfter = retryAfter(h, body, time.Now())
	}
	return e
}

// retryAfter reads how long a provider asked us to wait: Retry-After (seconds or an
// HTTP date), retry-after-ms, or Google's RetryInfo.retryDelay ("34.4s") in the body.
func retryAfter(h http.Header, body []byte, now time.Time) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
			return time.Duration(s * float64(time.Second))
		}
		if t, err := http.ParseTime(v); err == nil {
			if d := t.Sub(now); d > 0 {
				return d
			}
			return 0
		}
	}
	var g struct {
		Error struct {
			Details []struct {
				Type       string `json:"@type"`
				RetryDelay string `json:"retryDelay"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &g) == nil {
		for _, d := range g.Error.Details {
			if strings.HasSuffix(d.Type, "google.rpc.RetryInfo") {
				if dur, err := time.ParseDuration(d.RetryDelay); err == nil {
					return dur
				}
			}
		}
	}
	return 0
}

// errorMessage digs the human message out of the error envelopes providers use:
// {"error":{"message"}} (OpenAI, Gemini, Anthropic, OpenRouter, Zhipu),
// {"error":{"detail"}} (Brave), {"detail":{"error"}} or {"detail":"…"} (Tavily),
// {"message"} (Serper), {"error":"…"}; otherwise the body text itself.
func errorMessage(body []byte) string {
	var v map[string]any
	if json.Unmarshal(body, &v) != nil {
		return strings.TrimSpace(string(body))
	}
	pick := func(m map[string]any, keys ...string) string {
		for _, k := range keys {
			switch x := m[k].(type) {
			case string:
				if x != "" {
					return x
				}
			case map[string]any:
				if s := pickString(x, "message", "detail", "error"); s != "" {
					return s
				}
			}
		}
		return ""
	}
	if s := pick(v, "error", "detail", "message"); s != "" {
		code := ""
		if e, ok := v["error"].(map[string]any); ok {
			code = pickString(e, "code", "type", "status")
		}
		if code != "" && !strings.Contains(s, code) {
			return code + ": " + s
		}
		return s
	}
	return strings.TrimSpace(string(body))
}

func pickString(m map[string]any, keys ...string) string {
	for _, k := range keys {
		switch x := m[k].(type) {
		case string:
			if x != "" {
				return x
			}
		case float64:
			return strconv.FormatFloat(x, 'f', -1, 64)
		}
	}
	return ""
}

// quotaBody reports whether a 429 body says the account is out of money rather than
// going too fast (OpenAI insufficient_quota, Zhipu 1113 余额不足).
func quotaBody(body []byte) bool {
	s := string(body)
	return strings.Contains(s, "insufficient_quota") || strings.Contains(s, `"1113"`) ||
		strings.Contains(s, `"code":1113`) || strings.Contains(s, "余额不足")
}

// bearer is an Authorization header with a bearer token.
func bearer(key string) http.Header {
	h := http.Header{}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	return h
}

// header builds a header with one key/value, skipped when the value is empty.
func header(k, v string) http.Header {
	h := http.Header{}
	if v != "" {
		h.Set(k, v)
	}
	return h
}

// missingKey is the error for an engine whose API key variable is unset.
func missingKey(cfg Config) *Error {
	return &Error{Kind: Auth, Engine: cfg.ID, Message: fmt.Sprintf("API key variable %s is not set", cfg.APIKeyEnv)}
}
