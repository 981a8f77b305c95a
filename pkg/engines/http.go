package engines

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/provider"
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
	// price is what one search is expected to cost in USD: the configured
	// costPerSearchUSD or the kind's list price (per credit for Serper, per
	// web_search call for Perplexity); a spend budget reserves it before the call.
	price float64
	// caps are the query fields the kind applies natively (Capabilities), set by its
	// constructor from its options.
	caps Capabilities
}

// Name is the engine's id: the kinds that embed a client are named by it.
func (c *client) Name() string { return c.id }

// Capabilities are the kind's, as its constructor set them.
func (c *client) Capabilities() Capabilities { return c.caps }

func newClient(cfg Config, hc *http.Client, defaultBase string) client {
	base := cmp.Or(strings.TrimRight(cfg.BaseURL, "/"), defaultBase)
	return client{id: cfg.ID, hc: cmp.Or(hc, http.DefaultClient), baseURL: base, key: cfg.APIKey}
}

// request describes one HTTP call.
type request struct {
	method string
	path   string // appended to baseURL; may carry a query string
	header http.Header
	body   any // marshalled as JSON when non-nil
	// classify, when set, reclassifies a non-2xx answer by what its message says
	// (the provider's own error code) where the status says less.
	classify func(*Error)
}

// do sends req and returns the 2xx body. A non-2xx answer becomes an *Error classified
// by status and body (and req.classify), with the API key redacted from its message.
func (c *client) do(ctx context.Context, req request) ([]byte, error) {
	var rd io.Reader
	if req.body != nil {
		b, err := json.Marshal(req.body)
		if err != nil {
			return nil, &Error{Kind: BadRequest, Engine: c.id, Message: "encoding request: " + err.Error()}
		}
		rd = bytes.NewReader(b)
	}
	hr, err := http.NewRequestWithContext(ctx, cmp.Or(req.method, http.MethodPost), c.baseURL+req.path, rd)
	if err != nil {
		return nil, &Error{Kind: BadRequest, Engine: c.id, Message: c.redact(err.Error())}
	}
	maps.Copy(hr.Header, req.header)
	if req.body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	hr.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(hr)
	if err != nil {
		return nil, c.transportError(ctx, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, c.transportError(ctx, err)
	}
	if resp.StatusCode/100 != 2 {
		e := c.statusError(resp.StatusCode, resp.Header, body)
		if req.classify != nil {
			req.classify(e)
		}
		return nil, e
	}
	return body, nil
}

// decode unmarshals a 2xx body, turning failure into a Decode error.
func decode[T any](c *client, body []byte, out *T) error {
	if err := json.Unmarshal(body, out); err != nil {
		return &Error{Kind: Decode, Engine: c.id, Message: "reading response: " + redact.Truncate(err.Error(), 200)}
	}
	return nil
}

func (c *client) redact(s string) string { return provider.Redact(s, c.key) }

// classicBody returns the one response body a classic kind parses (they make one call
// per search), or a Decode error when there is none.
func classicBody(c *client, bodies [][]byte) ([]byte, error) {
	if len(bodies) == 0 || len(bodies[0]) == 0 {
		return nil, &Error{Kind: Decode, Engine: c.id, Message: "empty response body"}
	}
	return bodies[0], nil
}

// decodeClassic decodes the one response body of a classic kind (classicBody) into
// out.
func decodeClassic[T any](c *client, bodies [][]byte, out *T) error {
	body, err := classicBody(c, bodies)
	if err != nil {
		return err
	}
	return decode(c, body, out)
}

// searchOnce is the search of a kind that makes one call: refused without a key,
// else req sent and its answer read by parse, the method that reads recordings too.
func (c *client) searchOnce(ctx context.Context, q Query, req request, parse func(Query, [][]byte) (*Result, error)) (*Result, error) {
	if c.key == "" {
		return nil, &Error{Kind: Auth, Engine: c.id, Message: "no API key configured"}
	}
	body, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	return parse(q, [][]byte{body})
}

func (c *client) transportError(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return AsError(c.id, ctxErr)
	}
	// The message says what failed in stable words, without the engine's address;
	// the transport's error is kept in Err for the log, with the URL's query values
	// hidden (they carry the user's search query, and for some kinds the key).
	var ue *url.Error
	if errors.As(err, &ue) {
		err = &url.Error{Op: ue.Op, URL: redact.Query(ue.URL), Err: ue.Err}
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

// statusError classifies a non-2xx answer (provider.Classify), with the wait the
// provider asked for (provider.RetryAfter) when it is worth retrying.
func (c *client) statusError(status int, h http.Header, body []byte) *Error {
	e := &Error{Engine: c.id, Status: status, Kind: provider.Classify(status, body),
		Message: c.redact(redact.Truncate(provider.ErrorMessage(body), 300))}
	if e.Kind.Retryable() {
		e.RetryAfter = provider.RetryAfter(h, body, time.Now())
	}
	return e
}

// bearer is an Authorization header with a bearer token.
func bearer(key string) http.Header { return header("Authorization", "Bearer "+key) }

// header builds a header with one key/value: a credential, which the kinds send only
// when they have one (searchOnce refuses to search without a key).
func header(k, v string) http.Header {
	h := http.Header{}
	h.Set(k, v)
	return h
}
