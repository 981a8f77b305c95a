package engines

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/provider"
)

// LLM-grounded engines are thin adapters over the main-model codecs: a grounded
// search is a main-model call with the provider's own search switched on, its answer
// read as search results. An adapter builds a canonical request (the query as the
// user's turn, groundedAInstructions as the system prompt, llm.SearchOptions for the
// provider's search tool), calls the model through pkg/llm/upstream (the protocol's
// codec in pkg/llm/wire encodes it and decodes the answer; the provider layer's
// exchange, credentials and Retry-After rule apply; a paused answer is resumed there),
// and maps the answer's server calls, results and citations to a Result. Each
// provider format is thus decoded in one file, pkg/llm/wire/model_<protocol>.go, for
// main models and engines alike. parse (Normalize) decodes recorded bodies with the
// same codec.

// grounded is what every grounded adapter holds: the engine's client (id, base URL,
// key) and the model caller of its protocol.
type grounded struct {
	client
	keyEnv string
	model  string
	api    wire.ModelAPI
	call   *upstream.Caller
	price  float64
}

// newGrounded builds the adapter's parts; the model caller's base URL is the engine's
// with apiPath appended (OpenAI's SDK base ends in /v1, the engine's does not).
func newGrounded(cfg Config, hc *http.Client, api wire.ModelAPI, defaultBase, apiPath, defaultModel string) grounded {
	g := grounded{client: newClient(cfg, hc, defaultBase), keyEnv: cfg.APIKeyEnv, model: strings.TrimSpace(cfg.Model), api: api}
	if g.model == "" {
		g.model = defaultModel
	}
	g.call = upstream.New(api, cfg.ID, g.baseURL+apiPath, g.key, g.hc, upstream.Options{Credentials: g.credentials()})
	return g
}

func (g *grounded) Name() string { return g.id }

// ask makes the model call of one search: q as the user's turn, the grounded system
// prompt, the provider's search with so. An answer that came with an error (a
// resumption failed) is returned with it.
func (g *grounded) ask(ctx context.Context, q Query, so *llm.SearchOptions, maxTokens int) (*wire.Response, error) {
	if g.key == "" {
		return nil, missingKey(Config{ID: g.id, APIKeyEnv: g.keyEnv})
	}
	so.Requested = true
	req := &wire.Request{Model: g.model, System: groundedAInstructions(q), Search: so, MaxTokens: maxTokens,
		Messages: []wire.Message{{Role: wire.RoleUser, Parts: []wire.Part{{Kind: wire.PartText, Text: q.Query}}}}}
	answer, err := g.call.Answer(ctx, req)
	if err != nil {
		return answer, g.modelError(err)
	}
	return answer, nil
}

// credentials are the one key of a model caller built for an engine: the engine's
// rotation (keys.go) rests and tells of refused keys, so these do not.
func (c *client) credentials() *llm.Credentials {
	return llm.NewCredentials(c.id, []string{c.key}, llm.CredentialOptions{Log: slog.New(slog.DiscardHandler)})
}

// replay is an HTTP transport that answers the calls of one search with recorded
// bodies, in order (the last again once they run out): parse reads recordings through
// the same model caller a search uses.
type replay [][]byte

func (r *replay) RoundTrip(req *http.Request) (*http.Response, error) {
	body := (*r)[0]
	if len(*r) > 1 {
		*r = (*r)[1:]
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(body)), Request: req}, nil
}

// decodeAll reads recorded answers with the protocol's codec, joined as one (a paused
// answer and its continuations).
func (g *grounded) decodeAll(bodies [][]byte) (*wire.Response, error) {
	if len(bodies) == 0 {
		return nil, &Error{Kind: Decode, Engine: g.id, Message: "no response body"}
	}
	var out *wire.Response
	for _, b := range bodies {
		r, err := g.api.DecodeResponse(b)
		if err != nil {
			return nil, g.modelError(err)
		}
		if out == nil {
			out = r
		} else {
			out = out.Join(r)
		}
	}
	return out, nil
}

// modelError is a model call's failure as an engine's: a provider's status is
// classified by the provider layer (provider.Classify), an answer that did not decode
// is Decode, a failure without an answer Unavailable (in words that name no address).
func (g *client) modelError(err error) error {
	var le *llm.Error
	if !errors.As(err, &le) {
		if ctx := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded); ctx {
			return AsError(g.id, err)
		}
		return &Error{Kind: Decode, Engine: g.id, Message: g.redact(truncate(err.Error(), 300))}
	}
	msg := le.Message
	if le.Type != "" && !strings.Contains(msg, le.Type) {
		msg = le.Type + ": " + msg // the provider's error type or status ("NOT_FOUND")
	}
	e := &Error{Engine: g.id, Status: le.Status, Message: g.redact(truncate(msg, 300)), RetryAfter: le.RetryAfter}
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

// groundedAInsert places markers at byte offsets into a model-written text, first
// escaping any "[n]" the model wrote itself ("\[n\]", which markdown renders the same)
// so that the shared normalization does not take it for a citation of source n.
func groundedAInsert(text string, ins []Insert) string {
	found := markerRE.FindAllStringIndex(text, -1)
	if len(found) == 0 {
		return InsertAtBytes(text, ins)
	}
	ins = slices.Clone(ins)
	for i := range ins {
		shift := 0
		for _, m := range found {
			switch {
			case m[1] <= ins[i].Offset:
				shift += 2
			case m[0] < ins[i].Offset:
				shift++
			}
		}
		ins[i].Offset += shift
	}
	var b strings.Builder
	prev := 0
	for _, m := range found {
		b.WriteString(text[prev:m[0]])
		b.WriteString(`\`)
		b.WriteString(text[m[0] : m[1]-1])
		b.WriteString(`\]`)
		prev = m[1]
	}
	b.WriteString(text[prev:])
	return InsertAtBytes(b.String(), ins)
}

// groundedAInstructions is the system prompt of the grounded adapters: search, answer
// briefly from the results, cite. The user message is the query itself, verbatim.
func groundedAInstructions(q Query) string {
	var b strings.Builder
	b.WriteString("You are a web search engine. Search the web for the user's message, which is a search query, " +
		"and reply with a concise, factual summary of what the search results say, citing the pages you used. " +
		"Do not ask questions and do not answer from memory alone.")
	switch q.Recency {
	case OneDay:
		b.WriteString(" Prefer pages published in the last 24 hours.")
	case OneWeek:
		b.WriteString(" Prefer pages published in the last week.")
	case OneMonth:
		b.WriteString(" Prefer pages published in the last month.")
	case OneYear:
		b.WriteString(" Prefer pages published in the last year.")
	}
	return b.String()
}

// groundedANearest finds the occurrence of sub in text whose end is nearest to want,
// and returns that end (a byte offset).
func groundedANearest(text, sub string, want int) (int, bool) {
	best, found := 0, false
	for from := 0; from <= len(text); {
		i := strings.Index(text[from:], sub)
		if i < 0 {
			break
		}
		end := from + i + len(sub)
		if !found || max(end-want, want-end) < max(best-want, want-best) {
			best, found = end, true
		}
		from += i + 1
	}
	return best, found
}
