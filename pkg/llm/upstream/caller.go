// Package upstream calls main models in every protocol they speak (OpenAI Chat and
// the compatible providers, OpenAI Responses, Anthropic Messages, Gemini: a
// wire.ModelAPI each). A Caller takes a hop's request in canonical form, encodes it
// once with the model's codec (Prepare), sends it and gives the answer back as the
// turn the chain keeps (wire.Turn), so the chat worker never knows which protocol its
// model speaks. It is the fleet's one HTTP caller of model providers: the grounded
// search engines call it too, in canonical form (Answer) or with their own request
// body (Send), so every model call shares one exchange, the provider's credentials
// (provider.Credentials) and its errors (*llm.Error, classified by provider.Classify).
package upstream

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/provider"
)

// maxAnswer bounds a model's answer body.
const maxAnswer = 64 << 20

// Caller calls one provider's main models in its protocol.
type Caller struct {
	api     wire.ModelAPI
	name    string
	baseURL string
	creds   *provider.Credentials // keys never logged, never in an error
	hc      *http.Client
	opts    Options
}

// Options are a caller's settings beyond the provider.
type Options struct {
	// NativeSearch forwards the provider's own web search instead of the fleet's:
	// when the chain offers the web_search tool, the model gets its protocol's search
	// tool in its place, and the searches it runs come back in the answer's
	// llm.NativeKey report (with their cost), its citations as [n] markers.
	NativeSearch bool
	// Credentials, when set, replace New's key: several keys rotated and rested, or
	// an access token (provider.Credentials).
	Credentials *provider.Credentials
	// Reasons says the model reasons when a request asks for no reasoning: an OpenAI
	// Responses model is then asked for its encrypted reasoning all the same (the
	// fleet stores nothing at the provider, and the next hop must send it back).
	Reasons bool
}

// New returns a caller of the provider name at baseURL speaking api, authenticating
// with key. The base URL is what the protocol's SDKs take: ".../v1" for OpenAI
// Responses, the host root for Anthropic and Gemini.
func New(api wire.ModelAPI, name, baseURL, key string, hc *http.Client, opts Options) *Caller {
	if hc == nil {
		hc = http.DefaultClient
	}
	creds := opts.Credentials
	if creds == nil {
		creds = provider.NewCredentials(name, []string{key}, provider.CredentialOptions{})
	}
	return &Caller{api: api, name: name, baseURL: strings.TrimRight(baseURL, "/"), creds: creds, hc: hc, opts: opts}
}

// Protocol returns the protocol the caller speaks.
func (c *Caller) Protocol() wire.Protocol { return c.api.Protocol() }

// Call is one main-model call of the chain, translated into the provider's protocol
// (Prepare) and not yet sent.
type Call struct {
	model  string
	body   []byte
	stream bool
}

// Size is the length of the request's body: what a reservation of the call's worst
// case counts its input by.
func (p *Call) Size() int { return len(p.body) }

// Prepare translates the chain's request for a hop into the provider's protocol, once:
// the model's own search takes the place of the fleet's web_search tool when the
// caller forwards native search (searchTool), and the call streams when stream is set
// and the protocol can resume a paused answer while streaming. req is not modified.
// A request the protocol cannot carry is an *llm.Error with status 400.
func (c *Caller) Prepare(req *wire.Request, stream bool) (*Call, error) {
	r := *req
	c.searchTool(&r)
	if c.opts.Reasons && r.Reasoning == nil && c.api.Protocol() == wire.OpenAIResponses {
		r.Reasoning = &wire.ReasoningConfig{} // its default effort, its state asked for
	}
	if _, rounds := c.api.(openaichat.SearchRounds); rounds && r.Search != nil {
		stream = false // only a whole answer is resumed: each search round is
	}
	r.Stream = stream
	out, err := c.api.EncodeRequest(&r, r.Model)
	if err != nil {
		return nil, &llm.Error{Provider: c.name, Status: http.StatusBadRequest, Type: "invalid_request_error", Message: "the chain's request does not translate: " + err.Error()}
	}
	return &Call{model: r.Model, body: out, stream: stream}, nil
}

// Complete makes a prepared call (streaming when it was prepared to, and then onDelta
// gets the answer's text in order, on the calling goroutine) and returns the answer as
// the chain keeps it. Errors are *llm.Error values (status, retry-after) or the
// context's error.
func (c *Caller) Complete(ctx context.Context, p *Call, onDelta func(llm.Delta)) (*wire.Turn, error) {
	answer, raw, err := c.call(ctx, p.model, p.body, p.stream, onDelta)
	if err != nil {
		return nil, err
	}
	if answer, err = c.resume(ctx, p.model, p.body, answer, raw); err != nil {
		return nil, err
	}
	t := wire.TurnOf(answer)
	c.priceNative(t, p.model)
	return t, nil
}

// Answer is one model call in canonical form, for the LLM-grounded search engines (a
// grounded engine is a main-model call with the provider's own search on, read as
// search results): req, its Search set, encoded in the caller's protocol, sent with the
// caller's credentials, its answer decoded and, when it paused, resumed
// (maxContinuations) and joined. When a resumption fails the error comes with the
// answer so far (the searches it ran are paid for). Errors are *llm.Error values or
// the context's error.
func (c *Caller) Answer(ctx context.Context, req *wire.Request) (*wire.Response, error) {
	out, err := c.api.EncodeRequest(req, req.Model)
	if err != nil {
		return nil, &llm.Error{Provider: c.name, Status: http.StatusBadRequest, Type: "invalid_request_error", Message: "the request does not translate: " + err.Error()}
	}
	first, raw, err := c.call(ctx, req.Model, out, false, nil)
	if err != nil {
		return nil, err
	}
	return c.resume(ctx, req.Model, out, first, raw)
}

// maxContinuations bounds the resumptions of one paused answer (main models and
// grounded engines alike: the engines call Answer).
const maxContinuations = 3

// resume resumes a paused answer (Anthropic's pause_turn, a long run of the provider's
// own searches) with the paused content sent back as it came, and joins the parts;
// sent is the request that got answer, raw its body when it was read whole (a
// streamed answer is never resumed). When a resumption fails, the answer so far comes
// with the error, for a caller that can use it (Answer).
func (c *Caller) resume(ctx context.Context, model string, sent []byte, answer *wire.Response, raw []byte) (*wire.Response, error) {
	cont, _ := c.api.(wire.Continuer)
	if cont == nil {
		return answer, nil
	}
	for i := 0; raw != nil && i < maxContinuations; i++ {
		next, paused := cont.Continue(sent, raw)
		if !paused {
			break
		}
		more, moreRaw, err := c.call(ctx, model, next, false, nil)
		if err != nil {
			return answer, err
		}
		answer, sent, raw = answer.Join(more), next, moreRaw
	}
	return answer, nil
}

// call posts one request and reads its answer; raw is the answer's body when it was
// read whole (nil when streamed). A request refused for its key is made again with
// the provider's next key (provider.Credentials).
func (c *Caller) call(ctx context.Context, model string, out []byte, stream bool, onDelta func(llm.Delta)) (answer *wire.Response, raw []byte, err error) {
	err = c.creds.Try(ctx, onDelta, func(cred provider.Credential, onDelta func(llm.Delta)) (err error) {
		answer, raw, err = c.callWith(ctx, cred, model, out, stream, onDelta)
		return err
	})
	return answer, raw, err
}

// authorize sets the headers that carry cred: the protocol's own for a key; for an
// access token a bearer token (Gemini's OAuth form, where its key would go in
// x-goog-api-key; Anthropic takes no OAuth token, so it keeps x-api-key).
func (c *Caller) authorize(h http.Header, cred provider.Credential) {
	if cred.Token && c.api.Protocol() == wire.Gemini {
		c.api.Authorize(h, "")
		h.Set("Authorization", "Bearer "+cred.Value)
		return
	}
	c.api.Authorize(h, cred.Value)
}

// callWith makes one request with cred.
func (c *Caller) callWith(ctx context.Context, cred provider.Credential, model string, out []byte, stream bool, onDelta func(llm.Delta)) (*wire.Response, []byte, error) {
	resp, err := c.post(ctx, cred, model, out, stream)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	var answer *wire.Response
	var raw []byte
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); stream && mt == "text/event-stream" {
		answer, err = c.readStream(resp.Body, onDelta)
	} else {
		answer, raw, err = c.readWhole(resp, onDelta)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, c.asError(resp.StatusCode, err)
	}
	return answer, raw, nil
}

// Send posts body, a request already in the caller's protocol for model (an engine's
// own search request), with the caller's credentials, and returns the body of the 2xx
// answer as it came, for a caller that reads its own format (OpenRouter's and
// Perplexity's search engines, glm-chat). A non-2xx answer is an *llm.Error (status,
// the provider's message, its Retry-After), as is a failure to reach the provider
// (status 0); an in-band error inside a 2xx body is the reader's to find.
func (c *Caller) Send(ctx context.Context, model string, body []byte) ([]byte, error) {
	var data []byte
	err := c.creds.Try(ctx, nil, func(cred provider.Credential, _ func(llm.Delta)) error {
		resp, err := c.post(ctx, cred, model, body, false)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if data, err = io.ReadAll(io.LimitReader(resp.Body, maxAnswer)); err != nil && ctx.Err() == nil {
			return &llm.Error{Provider: c.name, Message: c.creds.Redact("reading the answer: " + err.Error()), Err: err}
		}
		return ctx.Err()
	})
	if err != nil {
		return nil, err
	}
	return data, nil
}

// post makes one request with cred and returns the 2xx response, its body to be read
// and closed; a non-2xx answer or a failure to send is the error.
func (c *Caller) post(ctx context.Context, cred provider.Credential, model string, out []byte, stream bool) (*http.Response, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.baseURL+c.api.Path(model, stream), bytes.NewReader(out))
	if err != nil {
		return nil, &llm.Error{Provider: c.name, Message: "building request", Err: err}
	}
	hr.Header.Set("Content-Type", "application/json")
	if stream {
		hr.Header.Set("Accept", "text/event-stream")
	} else {
		hr.Header.Set("Accept", "application/json")
	}
	c.authorize(hr.Header, cred)
	resp, err := c.hc.Do(hr)
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil { // the provider was not heard: an error without status
		return nil, &llm.Error{Provider: c.name, Message: c.creds.Redact(err.Error()), Err: errors.Unwrap(err)}
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, c.httpError(resp, data)
	}
	return resp, nil
}

// searchTool puts the provider's own search in place of the fleet's web_search tool
// when the caller forwards native search; otherwise the request declares none (the
// chain's web_search is a function tool like any other).
func (c *Caller) searchTool(req *wire.Request) {
	req.Search = nil
	if !c.opts.NativeSearch {
		return
	}
	var kept []wire.Tool
	var search *llm.SearchOptions
	for _, t := range req.Tools {
		if llm.IsWebSearchCall(t.Name) {
			search = &llm.SearchOptions{Requested: true}
			continue
		}
		kept = append(kept, t)
	}
	if f, ok := c.api.(wire.SearchFitter); ok && search != nil && !f.NativeSearchFits(&wire.Request{Tools: kept, Search: search}, req.Model) {
		return // the provider's search cannot go with this request: the fleet's runs
	}
	req.Tools, req.Search = kept, search
	if tc := req.ToolChoice; tc != nil && tc.Mode == "tool" && llm.IsWebSearchCall(tc.Name) {
		req.ToolChoice = nil
	}
}

// priceNative names the protocol and the cost in a turn's native-search report,
// priced for the model that answered (its version as the answer names it, else the
// one asked for).
func (c *Caller) priceNative(t *wire.Turn, asked string) {
	if !c.opts.NativeSearch || t.Native == nil {
		return
	}
	answered := cmp.Or(t.Model, asked)
	name, price, _ := c.api.NativeSearch(answered)
	t.Native.Protocol, t.Native.CostUSD = name, float64(t.Native.Requests)*price
}

// readWhole reads a whole answer; a streaming caller gets its text as one delta.
func (c *Caller) readWhole(resp *http.Response, onDelta func(llm.Delta)) (*wire.Response, []byte, error) {
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, nil, &llm.Error{Status: http.StatusBadGateway, Message: "reading response: " + err.Error()}
	}
	answer, err := c.api.DecodeResponse(data)
	if err != nil {
		return nil, nil, err
	}
	if t := answer.Text(); onDelta != nil && t != "" {
		onDelta(llm.Delta{Text: t})
	}
	return answer, data, nil
}

// readStream decodes a streamed answer, passing its text on as it arrives.
func (c *Caller) readStream(body io.Reader, onDelta func(llm.Delta)) (*wire.Response, error) {
	dec := c.api.NewStreamDecoder()
	var eventErr error
	err := llm.ReadSSE(body, func(event string, data []byte) error {
		if string(data) == "[DONE]" {
			return nil
		}
		text, err := dec.Event(event, data)
		if err != nil {
			eventErr = err
			return err
		}
		if text != "" {
			onDelta(llm.Delta{Text: text})
		}
		return nil
	})
	switch {
	case eventErr != nil:
		return nil, eventErr
	case err != nil:
		// The connection broke mid-answer: the same call may succeed again.
		return nil, &llm.Error{Status: http.StatusBadGateway, Type: "stream_broken", Message: "the model's stream broke off: " + err.Error()}
	}
	return dec.Response()
}

// asError makes err an *llm.Error of this provider: a provider's error stays one
// (with its status), anything else (an unreadable answer) is a bad response.
func (c *Caller) asError(status int, err error) *llm.Error {
	var le *llm.Error
	if errors.As(err, &le) {
		e := *le
		e.Provider = c.name
		e.Message = c.creds.Redact(e.Message)
		return &e
	}
	return &llm.Error{Provider: c.name, Status: status, Type: "bad_response", Message: c.creds.Redact(err.Error())}
}

func (c *Caller) httpError(resp *http.Response, data []byte) *llm.Error {
	e := c.api.DecodeError(resp.StatusCode, data)
	e.Provider = c.name
	e.Message = c.creds.Redact(redact.Truncate(e.Message, 500))
	if d := provider.RetryAfter(resp.Header, data, time.Now()); d > 0 {
		e.RetryAfter = d
	}
	return e
}
