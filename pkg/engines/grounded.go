package engines

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/provider"
)

// LLM-grounded engines are thin adapters over the main-model codecs: a grounded
// search is a main-model call with the provider's own search switched on, its answer
// read as search results. The search is grounded's, the same for every protocol: a
// canonical request (the query as the user's turn, groundedAInstructions as the
// system prompt, the adapter's llm.SearchOptions) goes through pkg/llm/upstream, with
// the protocol's codec (the one main models use), the provider layer's exchange,
// credentials and Retry-After rule, and a paused answer resumed. An adapter says only
// how to search (groundedKind.searchOptions) and how the answer reads as a Result
// (groundedKind.result, with the shared pages and marks); parse runs recorded bodies
// through the same caller. The Chat-protocol adapters (Kimi, GLM) read their answers
// through pkg/llm/nativechat and share pages.

// grounded is what every adapter over a model codec holds: the engine's client (id,
// base URL, key), the model caller of its protocol and the adapter's own part.
type grounded struct {
	client
	keyEnv  string
	model   string
	api     wire.ModelAPI
	apiPath string
	call    *upstream.Caller
	who     string // the model as warnings name it ("Claude")
	kind    groundedKind
}

// groundedKind is what an adapter adds to the shared search.
type groundedKind interface {
	// searchOptions are the provider's search settings for q, and the answer's
	// max_tokens (0: the provider's default).
	searchOptions(q Query) (*llm.SearchOptions, int)
	// result reads an answer (continuations joined) as search results.
	result(q Query, a *wire.Response) (*Result, error)
}

// newGrounded builds the shared part of an adapter; the model caller's base URL is
// the engine's with apiPath appended (OpenAI's SDK base ends in /v1, the engine's
// does not).
func newGrounded(cfg Config, hc *http.Client, api wire.ModelAPI, defaultBase, apiPath, defaultModel, who string, kind groundedKind) grounded {
	g := grounded{client: newClient(cfg, hc, defaultBase), keyEnv: cfg.APIKeyEnv, model: cmp.Or(strings.TrimSpace(cfg.Model), defaultModel),
		api: api, apiPath: apiPath, who: who, kind: kind}
	g.call = g.caller(g.hc)
	return g
}

// caller is a model caller of the adapter's protocol on hc.
func (g *grounded) caller(hc *http.Client) *upstream.Caller {
	return g.modelCaller(g.api, g.baseURL+g.apiPath, hc)
}

func (g *grounded) Search(ctx context.Context, q Query) (*Result, error) {
	if g.key == "" {
		return nil, &Error{Kind: Auth, Engine: g.id, Message: fmt.Sprintf("API key variable %s is not set", g.keyEnv)}
	}
	return g.run(ctx, g.call, q)
}

// run makes the model call of one search with call and reads its answer. When
// resuming a paused answer failed, the answer so far is the result, with a warning:
// a failed continuation does not void the searches already paid for.
func (g *grounded) run(ctx context.Context, call *upstream.Caller, q Query) (*Result, error) {
	so, maxTokens := g.kind.searchOptions(q)
	so.Requested = true
	req := &wire.Request{Model: g.model, System: groundedAInstructions(q), Search: so, MaxTokens: maxTokens, Messages: userTurn(q.Query)}
	answer, err := call.Answer(ctx, req)
	if err == nil {
		return g.kind.result(q, answer)
	}
	e := g.modelError(err)
	if answer != nil && ctx.Err() == nil {
		if res, rerr := g.kind.result(q, answer); rerr == nil {
			res.partialf("continuing %s's paused turn failed (%s); this is the answer so far", g.who, AsError(g.id, e).Kind)
			return res, nil
		}
	}
	return nil, e
}

// userTurn is a search's query as the one user turn of a model call.
func userTurn(query string) []wire.Message {
	return []wire.Message{{Role: wire.RoleUser, Parts: []wire.Part{{Kind: wire.PartText, Text: query}}}}
}

// chatGrounded is what the Chat-protocol adapters (Kimi, GLM) hold: the engine's
// client and model, and the adapter's search on an http.Client (which tests run over
// recorded bodies). pkg/llm/nativechat reads their answers, as for main models.
type chatGrounded struct {
	client
	model string
	kind  interface {
		run(ctx context.Context, hc *http.Client, q Query) (*Result, error)
	}
}

func (c *chatGrounded) Search(ctx context.Context, q Query) (*Result, error) {
	if c.key == "" {
		return nil, &Error{Kind: Auth, Engine: c.id, Message: "no API key configured"}
	}
	return c.kind.run(ctx, c.hc, q)
}

// send posts req, an engine's own request in api's protocol for model, through the
// model caller of api on hc (the provider layer's exchange, credentials and
// Retry-After rule) and returns the answer's body as it came: the engines that read
// their own answer (OpenRouter, Perplexity, glm-chat) make their call with it. Errors
// are upstream.Caller.Send's, for the engine to word (sendError, modelError).
func (c *client) send(ctx context.Context, api wire.ModelAPI, hc *http.Client, model string, req any) ([]byte, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, &Error{Kind: BadRequest, Engine: c.id, Message: "encoding request: " + err.Error()}
	}
	return c.modelCaller(api, c.baseURL, hc).Send(ctx, model, body)
}

// sendError is a failed send classified as a model call's failure (modelError), with
// a provider's error worded as the HTTP engines' are (provider.ErrorMessage): the
// provider's code, else its type, before its message; a body without the OpenAI
// envelope (the whole body is the message) read for the message it holds.
func (c *client) sendError(err error) error {
	out := c.modelError(err)
	var le *llm.Error
	var e *Error
	if !errors.As(err, &le) || le.Status == 0 || !errors.As(out, &e) || e.Kind == Decode {
		return out
	}
	msg := le.Message
	if code := cmp.Or(le.Code, le.Type); code == "" {
		msg = provider.ErrorMessage([]byte(msg))
	} else if !strings.Contains(msg, code) {
		msg = code + ": " + msg
	}
	e.Message = c.redact(redact.Truncate(msg, 300))
	return e
}

// modelCaller is a model caller of api at base on hc with the engine's one key: the
// engine's rotation (keys.go) rests and tells of refused keys, so its credentials do
// not.
func (c *client) modelCaller(api wire.ModelAPI, base string, hc *http.Client) *upstream.Caller {
	creds := provider.NewCredentials(c.id, []string{c.key}, provider.CredentialOptions{Log: slog.New(slog.DiscardHandler)})
	return upstream.New(api, c.id, base, "", hc, upstream.Options{Credentials: creds})
}

// modelError is a model call's failure as an engine's: a provider's status is
// classified by the provider layer (provider.Classify), an answer that did not decode
// is Decode, a failure without an answer Unavailable (in words that name no address).
func (g *client) modelError(err error) error {
	var le *llm.Error
	if ee := (*Error)(nil); errors.As(err, &ee) {
		return ee // the engine's own (a request that did not encode)
	}
	if !errors.As(err, &le) {
		if ctx := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded); ctx {
			return AsError(g.id, err)
		}
		return &Error{Kind: Decode, Engine: g.id, Message: g.redact(redact.Truncate(err.Error(), 300))}
	}
	msg := le.Message
	if le.Type != "" && !strings.Contains(msg, le.Type) {
		msg = le.Type + ": " + msg // the provider's error type or status ("NOT_FOUND")
	}
	e := &Error{Engine: g.id, Status: le.Status, Message: g.redact(redact.Truncate(msg, 300)), RetryAfter: le.RetryAfter}
	switch {
	case le.Status == 0:
		e.Kind, e.Message, e.Err = Unavailable, netReason(le), le
	case le.Status/100 == 2 || le.Type == "bad_response":
		e.Kind, e.Status = Decode, 0
	default:
		e.Kind = provider.Classify(le.Status, []byte(le.Type+" "+le.Code+" "+le.Message))
	}
	if !e.Kind.Retryable() {
		e.RetryAfter = 0
	}
	return e
}

// groundedAInstructions is the system prompt of the grounded adapters: search, answer
// briefly from the results, cite. The user message is the query itself, verbatim.
func groundedAInstructions(q Query) string {
	s := "You are a web search engine. Search the web for the user's message, which is a search query, " +
		"and reply with a concise, factual summary of what the search results say, citing the pages you used. " +
		"Do not ask questions and do not answer from memory alone."
	if w := groundedRecency[q.Recency]; w != "" {
		s += " Prefer pages published in the last " + w + "."
	}
	return s
}

var groundedRecency = map[Recency]string{OneDay: "24 hours", OneWeek: "week", OneMonth: "month", OneYear: "year"}

// pages numbers the pages of an answer as a result's sources, one per distinct URL in
// the order added (a page without URL is always new: the normalization drops it with
// a warning), each with its hit, and keeps which of them the answer cites.
type pages struct {
	hits  []Hit
	num   map[string]int // URL → source number
	cited []int          // source numbers in order of first citation
}

// add returns the source number of h's page, adding it when it is new.
func (p *pages) add(h Hit) int {
	if n, ok := p.num[h.URL]; ok && h.URL != "" {
		return n
	}
	if p.num == nil {
		p.num = map[string]int{}
	}
	p.hits = append(p.hits, h)
	p.num[h.URL] = len(p.hits)
	return len(p.hits)
}

// cite is add for a page the answer cites.
func (p *pages) cite(h Hit) int {
	n := p.add(h)
	if !slices.Contains(p.cited, n) {
		p.cited = append(p.cited, n)
	}
	return n
}

// citedFirst sets res's sources (numbered as added) and its hits: the cited pages
// first, in order of first citation, then the others. Uncited pages past count are
// left out of the sources (they remain hits), so that a long research turn does not
// flood the text the main model reads (finish drops a source without URI).
func (p *pages) citedFirst(res *Result, count int) {
	res.Citation.Sources = sourcesOf(p.hits)
	for _, n := range p.cited {
		res.Hits = append(res.Hits, p.hits[n-1])
	}
	for n, h := range p.hits {
		if !slices.Contains(p.cited, n+1) {
			res.Hits = append(res.Hits, h)
			if n+1 > count {
				res.Citation.Sources[n].Web.URI = ""
			}
		}
	}
}

// citedPages sets res's sources and hits to the pages an answer's [n] markers number,
// as pkg/llm/nativechat cites them (Kimi's links, GLM's refs, OpenRouter's links).
func citedPages(res *Result, cited []llm.NativeSource) {
	var p pages
	for _, s := range cited {
		p.cite(Hit{Title: s.Title, URL: s.URL})
	}
	p.citedFirst(res, 0)
}

// marks are the [n] markers of one text, by byte offset.
type marks struct {
	at   []int // offsets, in the order first marked
	nums map[int][]int
}

func (m *marks) add(at, n int) {
	if m.nums == nil {
		m.nums = map[int][]int{}
	}
	if _, ok := m.nums[at]; !ok {
		m.at = append(m.at, at)
	}
	m.nums[at] = append(m.nums[at], n)
}

// into returns a model-written text with the markers placed, several at one offset as
// one run ("[1][3]"), after escaping any "[n]" the model wrote itself ("\[n\]", which
// markdown renders the same) so that the shared normalization does not take it for a
// citation of source n.
func (m *marks) into(text string) string {
	ins := make([]Insert, 0, len(m.at))
	for _, at := range m.at {
		ins = append(ins, Insert{Offset: at, Text: MarkerText(m.nums[at])})
	}
	for _, mk := range markerRE.FindAllStringIndex(text, -1) {
		// After the markers placed at the same offsets (InsertAtBytes keeps their order).
		ins = append(ins, Insert{Offset: mk[0], Text: `\`}, Insert{Offset: mk[1] - 1, Text: `\`})
	}
	return InsertAtBytes(text, ins)
}
