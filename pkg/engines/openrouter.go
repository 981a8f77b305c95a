package engines

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/nativechat"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// openRouter is OpenRouter chat completions with web search (POST
// {base}/chat/completions, bearer key, default base https://openrouter.ai/api/v1,
// default model openai/gpt-4.1-mini): any model answers, OpenRouter runs the searches
// and returns the pages as url_citation annotations (WIRE_FORMATS.md §6).
//
// Options:
//
//	{"plugin": false,              // true: the older plugins:[{id:"web"}] form instead of the server tool
//	 "engine": "",                 // auto (default) | native | exa | firecrawl | parallel
//	 "maxUses": 1,                 // server tool: searches the model may run per request
//	 "searchContextSize": "",      // low | medium | high (provider default when empty)
//	 "systemPrompt": "…"}          // the instruction sent before the query
//
// The server tool (type openrouter:web_search) lets the model decide whether to
// search, and the recordings show models answering without searching; the default
// system prompt therefore tells it to search and cite. maxUses defaults to 1 because
// one query is one search here and each extra search is billed.
//
// Cost is usage.cost as OpenRouter reports it (USD, search fee and tokens included);
// without it, the configured or list price ($0.007, Exa's per-request fee) per search.
type openRouter struct {
	client
	model string
	opts  openrouterOptions
}

type openrouterOptions struct {
	Plugin            bool   `json:"plugin,omitempty"`
	Engine            string `json:"engine,omitempty"`
	MaxUses           int    `json:"maxUses,omitempty"`
	SearchContextSize string `json:"searchContextSize,omitempty"`
	SystemPrompt      string `json:"systemPrompt,omitempty"`
}

// openrouterSystemPrompt is the default instruction: search, answer briefly, cite.
const openrouterSystemPrompt = "Search the web for the user's query, then answer it concisely from the pages you found. Cite the pages you use."

func newOpenRouter(cfg Config, hc *http.Client) (Engine, error) {
	e := &openRouter{client: newClient(cfg, hc, "https://openrouter.ai/api/v1"), model: cmp.Or(cfg.Model, "openai/gpt-4.1-mini")}
	if err := optionsOf(cfg, &e.opts); err != nil {
		return nil, err
	}
	e.opts.MaxUses = cmp.Or(e.opts.MaxUses, 1)
	e.opts.SystemPrompt = cmp.Or(e.opts.SystemPrompt, openrouterSystemPrompt)
	e.price = priceOf(cfg, 0.007)
	// Domain filters are sent to OpenRouter and the annotations are checked against them
	// (engines differ in what they honour: OpenAI ignores excluded_domains, and the two
	// lists cannot be combined); the server tool takes a user location country.
	// max_results only binds the Exa/Firecrawl/Parallel engines, and there is no recency
	// or language field, so those are left to the shared normalization.
	e.caps = Capabilities{AllowedDomains: true, BlockedDomains: true, Country: !e.opts.Plugin}
	return e, nil
}

type openrouterTool struct {
	Type       string               `json:"type"`
	Parameters openrouterToolParams `json:"parameters"`
}

type openrouterToolParams struct {
	Engine            string              `json:"engine,omitempty"`
	MaxResults        int                 `json:"max_results,omitempty"`
	MaxUses           int                 `json:"max_uses,omitempty"`
	SearchContextSize string              `json:"search_context_size,omitempty"`
	AllowedDomains    []string            `json:"allowed_domains,omitempty"`
	ExcludedDomains   []string            `json:"excluded_domains,omitempty"`
	UserLocation      *openrouterLocation `json:"user_location,omitempty"`
}

type openrouterLocation struct {
	Type    string `json:"type"`
	Country string `json:"country"`
}

type openrouterPlugin struct {
	ID             string   `json:"id"`
	Engine         string   `json:"engine,omitempty"`
	MaxResults     int      `json:"max_results,omitempty"`
	IncludeDomains []string `json:"include_domains,omitempty"`
	ExcludeDomains []string `json:"exclude_domains,omitempty"`
}

// openrouterResponse is what an OpenRouter answer adds to a chat completion, read
// beside the Chat codec (openaichat.Model reads the text, its url_citation
// annotations and the finish reason): the error envelopes, at the top level or on the
// choice, the page text of each url_citation, and usage with its cost and searches.
type openrouterResponse struct {
	Choices []struct {
		Message struct {
			Annotations []struct {
				Type        string `json:"type"`
				URLCitation struct {
					Content string `json:"content"`
				} `json:"url_citation"`
			} `json:"annotations"`
		} `json:"message"`
		Error *openrouterErrorBody `json:"error"`
	} `json:"choices"`
	Usage struct {
		llm.Usage
		Cost                 *float64 `json:"cost"`
		ServerToolUseDetails struct {
			WebSearchRequests int `json:"web_search_requests"`
		} `json:"server_tool_use_details"`
	} `json:"usage"`
	Error *openrouterErrorBody `json:"error"`
}

// openrouterErrorBody is the OpenAI-style error envelope {"error":{"code","message",
// "metadata"}} OpenRouter uses (numeric code = HTTP status), also inside HTTP 200
// answers.
type openrouterErrorBody struct {
	Code     json.RawMessage `json:"code"`
	Message  string          `json:"message"`
	Type     string          `json:"type"`
	Metadata struct {
		Raw string `json:"raw"`
	} `json:"metadata"`
}

func (e *openRouter) Search(ctx context.Context, q Query) (*Result, error) {
	if e.key == "" {
		return nil, &Error{Kind: Auth, Engine: e.id, Message: "no API key configured"}
	}
	req, err := e.request(q)
	if err != nil {
		return nil, &Error{Kind: BadRequest, Engine: e.id, Message: "encoding request: " + err.Error()}
	}
	body, err := e.send(ctx, openaichat.Model, e.hc, e.model, json.RawMessage(req))
	if err != nil {
		return nil, e.sendError(err)
	}
	return e.parse(q, [][]byte{body})
}

// request is the Chat request for q, encoded by the Chat codec: the system prompt and
// the query as the user's turn, with OpenRouter's server tool (or the older web
// plugin) as a parameter of its own.
func (e *openRouter) request(q Query) ([]byte, error) {
	// The two domain lists cannot be combined: the allow list wins, parse enforces
	// the block list.
	var allowed, excluded []string
	if len(q.AllowedDomains) > 0 {
		allowed = q.AllowedDomains
	} else {
		excluded = q.BlockedDomains
	}
	name, value := "tools", any(nil)
	if e.opts.Plugin {
		name, value = "plugins", []openrouterPlugin{{ID: "web", Engine: e.opts.Engine, MaxResults: q.Count, IncludeDomains: allowed, ExcludeDomains: excluded}}
	} else {
		p := openrouterToolParams{
			Engine:            e.opts.Engine,
			MaxResults:        q.Count,
			MaxUses:           e.opts.MaxUses,
			SearchContextSize: e.opts.SearchContextSize,
			AllowedDomains:    allowed,
			ExcludedDomains:   excluded,
		}
		if len(q.Country) == 2 {
			p.UserLocation = &openrouterLocation{Type: "approximate", Country: strings.ToUpper(q.Country)}
		}
		value = []openrouterTool{{Type: "openrouter:web_search", Parameters: p}}
	}
	search, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	return openaichat.Model.EncodeRequest(&wire.Request{Model: e.model, System: e.opts.SystemPrompt, Messages: userTurn(q.Query),
		Params: map[string]json.RawMessage{name: search}}, e.model)
}

func (e *openRouter) parse(q Query, bodies [][]byte) (*Result, error) {
	var resp openrouterResponse
	if err := decode(&e.client, bodies[0], &resp); err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, openrouterInBand(&e.client, resp.Error, bodies[0])
	}
	res := &Result{Usage: Usage{
		Searches:     resp.Usage.ServerToolUseDetails.WebSearchRequests,
		InputTokens:  resp.Usage.PromptTokens,
		OutputTokens: resp.Usage.CompletionTokens,
	}}
	if resp.Usage.Cost != nil {
		res.Usage.CostUSD = *resp.Usage.Cost
	} else {
		res.Usage.CostUSD = e.price * float64(max(res.Usage.Searches, 1))
	}
	if len(resp.Choices) == 0 {
		return res, nil
	}
	c := resp.Choices[0]
	if c.Error != nil {
		return nil, openrouterInBand(&e.client, c.Error, bodies[0])
	}
	a, err := openaichat.Model.DecodeResponse(bodies[0])
	if err != nil {
		return nil, e.modelError(err)
	}
	if a.Stop == wire.StopMaxTokens {
		res.partialf("the answer was cut at the model's token limit")
	}
	// The codec's citations are the url_citation annotations in order: the page text
	// of the i-th is that of the i-th such annotation.
	var snippets []string
	for _, an := range c.Message.Annotations {
		if an.Type == "url_citation" {
			snippets = append(snippets, an.URLCitation.Content)
		}
	}
	var text string
	var cites []openrouterCite
	for _, p := range a.Content {
		if p.Kind != wire.PartText {
			continue
		}
		text = p.Text
		for i, u := range p.Citations {
			if u.URL == "" || i >= len(snippets) {
				continue
			}
			res.Hits = append(res.Hits, Hit{Title: u.Title, URL: u.URL, Snippet: snippets[i]})
			res.Citation.Sources = append(res.Citation.Sources, Source{Web: Web{Title: u.Title, URI: u.URL}})
			cites = append(cites, openrouterCite{num: len(res.Citation.Sources), Citation: u})
		}
	}
	if len(cites) > 0 {
		res.Summary = openrouterPlace(text, cites)
	} else {
		var cited []llm.NativeSource
		res.Summary, cited = nativechat.CiteLinks(text)
		citedPages(res, cited)
		if len(res.Citation.Sources) > 0 {
			res.warnf("OpenRouter returned no url_citation annotations: the sources are the links in the answer text")
		}
	}
	return res, nil
}

// openrouterCite is one annotation to place in the text as marker [num]; its offsets
// count code points, and are often 0/0.
type openrouterCite struct {
	num int
	wire.Citation
}

// openrouterPlace inserts each citation's marker into text. An annotation whose
// character span is real (non-empty, inside the text, and containing the page's
// host, URL or title, as OpenAI's "([domain](url))" spans do) gets its marker at the
// span's end. The others (OpenRouter's recordings are all 0/0) go after the sentence
// or line where the URL, its host or its title first appears, else at the end of the
// text. A text that already carries [n] markers is left alone: they number the
// annotations (models like Perplexity's write them).
func openrouterPlace(text string, cites []openrouterCite) string {
	if markerRE.MatchString(text) {
		return text
	}
	runes := utf8.RuneCountInString(text)
	var m marks
	for _, c := range cites {
		off := -1
		if c.End > c.Start && c.Start >= 0 && c.End <= runes {
			bs, be := CharToByte(text, c.Start), CharToByte(text, c.End)
			if openrouterMention(text[bs:be], c) >= 0 {
				off = be
			}
		}
		if off < 0 {
			off = openrouterAnchor(text, c)
		}
		m.add(off, c.num)
	}
	ins := make([]Insert, 0, len(m.at))
	for _, o := range m.at {
		t := MarkerText(m.nums[o])
		if openrouterAfterURL(text[:o]) {
			t = " " + t // keep the marker out of a bare URL
		}
		ins = append(ins, Insert{Offset: o, Text: t})
	}
	return InsertAtBytes(text, ins)
}

// openrouterMention is the offset just after the first mention in s of c's URL, else
// of its host, else of its title (when it has 4 bytes or more); -1 when s mentions
// none of them. A span that mentions c plausibly belongs to it.
func openrouterMention(s string, c openrouterCite) int {
	if i := strings.Index(s, c.URL); i >= 0 {
		return i + len(c.URL)
	}
	if h := hostOf(c.URL); h != "" {
		if i := openrouterIndexFold(s, h); i >= 0 {
			return i + len(h)
		}
	}
	if len(c.Title) >= 4 {
		if i := openrouterIndexFold(s, c.Title); i >= 0 {
			return i + len(c.Title)
		}
	}
	return -1
}

// openrouterAnchor is where an unanchored citation's marker goes: after the sentence
// or line that mentions its URL, host or title, else at the end of the text.
func openrouterAnchor(text string, c openrouterCite) int {
	end := len(strings.TrimRightFunc(text, unicode.IsSpace))
	if found := openrouterMention(text, c); found >= 0 {
		return min(openrouterSentenceEnd(text, found), end)
	}
	return end
}

// openrouterSentenceEnd returns the offset just after the sentence that contains
// text[from-1]: after ". ", "! ", "? " (or the same at the end of the text) and after
// "。！？", or before the line break, whichever comes first.
func openrouterSentenceEnd(text string, from int) int {
	for i := from; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		switch r {
		case '\n':
			return len(strings.TrimRightFunc(text[:i], unicode.IsSpace))
		case '.', '!', '?':
			if i+size == len(text) || text[i+size] == ' ' || text[i+size] == '\n' || text[i+size] == '\t' {
				return i + size
			}
		case '。', '！', '？':
			return i + size
		}
		i += size
	}
	return len(text)
}

// openrouterAfterURL reports whether text ends inside a bare URL token.
func openrouterAfterURL(text string) bool {
	i := strings.LastIndexFunc(text, unicode.IsSpace)
	tok := text[i+1:]
	return strings.HasPrefix(tok, "http://") || strings.HasPrefix(tok, "https://")
}

// openrouterIndexFold is a case-insensitive strings.Index that returns a byte offset
// into s itself (falling back to an exact search when lower-casing would move
// offsets).
func openrouterIndexFold(s, sub string) int {
	ls, lsub := strings.ToLower(s), strings.ToLower(sub)
	if len(ls) != len(s) || len(lsub) != len(sub) {
		return strings.Index(s, sub)
	}
	return strings.Index(ls, lsub)
}

// openrouterInBand turns an error envelope that arrived inside an HTTP 200 answer into
// an *Error. A numeric code is an HTTP status (OpenRouter's convention) and is
// classified like one; otherwise the type or code text decides, and an unknown
// in-band failure counts as Unavailable (it is the upstream's, and may pass).
func openrouterInBand(c *client, b *openrouterErrorBody, body []byte) *Error {
	code := strings.Trim(string(b.Code), `" `)
	msg := b.Message
	if b.Metadata.Raw != "" {
		msg += " (" + b.Metadata.Raw + ")"
	}
	if code != "" && code != "null" && !strings.Contains(msg, code) {
		msg = code + ": " + msg
	}
	var e *Error
	if n, err := strconv.Atoi(code); err == nil && n >= 400 && n < 600 {
		e = c.statusError(n, nil, body)
		e.Status = 0 // the HTTP status was 200; the code is in the message
	} else {
		e = &Error{Engine: c.id, Kind: Unavailable}
		switch hint := strings.ToLower(code + " " + b.Type); {
		case strings.Contains(hint, "rate_limit"):
			e.Kind = RateLimited
		case strings.Contains(hint, "quota"), strings.Contains(hint, "insufficient"):
			e.Kind = Quota
		case strings.Contains(hint, "auth"):
			e.Kind = Auth
		case strings.Contains(hint, "invalid"):
			e.Kind = BadRequest
		}
	}
	e.Message = c.redact(redact.Truncate(msg, 300))
	return e
}
