package engines

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// anthropic is Anthropic's Messages API with the server-side web search tool: POST
// {base}/v1/messages with x-api-key and anthropic-version: 2023-06-01; default base
// https://api.anthropic.com, default model claude-sonnet-4-5.
//
// Claude runs the searches itself (server_tool_use → web_search_tool_result blocks) and
// answers in text blocks whose citations name the result they rest on. Citations have
// no offsets, so a marker goes after each cited text block; source n is the n-th
// distinct result, in the order the searches returned them (a cited page that is not
// among the results is appended). Uncited results past the query's count are left out
// of the sources, so a long research turn does not flood the text the main model reads;
// they remain hits.
//
// A long search loop ends with stop_reason "pause_turn"; the engine then sends the
// conversation back — the user turn and the assistant content received so far,
// unchanged (its encrypted_content must round-trip) — and Claude continues, at most
// anthropicMaxContinuations times.
//
// Options:
//
//	{"toolVersion": "web_search_20250305"}  the tool type; "web_search_20260209" and later
//	                                        (dynamic filtering) are sent with
//	                                        allowed_callers ["direct"] so that models
//	                                        without programmatic tool calling accept it
//	{"maxUses": 5}                          searches Claude may run per request (default 5,
//	                                        a cost bound: $0.05)
//	{"maxTokens": 2048}                     max_tokens of each request (default 2048)
//
// Filters: allowed or blocked domains and the country (user_location) are applied by
// Anthropic. The tool takes allowed_domains or blocked_domains, not both: with both,
// allowed_domains is sent and blocked_domains is applied to the results afterwards,
// with a warning. Pricing: $10 per 1,000 searches (errored searches are not billed), so
// the default cost is $0.01 per search; tokens (search results count as input) are
// reported in Usage, not priced.
type anthropic struct {
	client
	keyEnv string
	model  string
	opts   anthropicOptions
	price  float64
	now    func() time.Time
}

// anthropicMaxContinuations bounds the pause_turn continuations of one search.
const anthropicMaxContinuations = 3

type anthropicOptions struct {
	ToolVersion string `json:"toolVersion,omitempty"`
	MaxUses     int    `json:"maxUses,omitempty"`
	MaxTokens   int    `json:"maxTokens,omitempty"`
}

var anthropicToolRE = regexp.MustCompile(`^web_search_\d{8}$`)

func newAnthropic(cfg Config, hc *http.Client) (Engine, error) {
	e := &anthropic{client: newClient(cfg, hc, "https://api.anthropic.com"), keyEnv: cfg.APIKeyEnv,
		model: strings.TrimSpace(cfg.Model), now: time.Now}
	if err := cfg.options(&e.opts); err != nil {
		return nil, err
	}
	if e.model == "" {
		e.model = "claude-sonnet-4-5"
	}
	if e.opts.ToolVersion == "" {
		e.opts.ToolVersion = "web_search_20250305"
	}
	if !anthropicToolRE.MatchString(e.opts.ToolVersion) {
		return nil, fmt.Errorf("engine %q: options.toolVersion %q is not a web_search_YYYYMMDD tool type", cfg.ID, e.opts.ToolVersion)
	}
	if e.opts.MaxUses == 0 {
		e.opts.MaxUses = 5
	}
	if e.opts.MaxTokens == 0 {
		e.opts.MaxTokens = 2048
	}
	if e.opts.MaxUses < 1 || e.opts.MaxTokens < 1 {
		return nil, fmt.Errorf("engine %q: options.maxUses and options.maxTokens must be positive", cfg.ID)
	}
	e.price = cfg.price(0.01)
	return e, nil
}

func (e *anthropic) Name() string { return e.id }

// Capabilities: domains (allowed or blocked) and country; see the type's comment.
func (e *anthropic) Capabilities() Capabilities {
	return Capabilities{AllowedDomains: true, BlockedDomains: true, Country: true}
}

type anthropicRequest struct {
	Model     string             `json:"model"`
	MaxTokens int                `json:"max_tokens"`
	System    string             `json:"system"`
	Messages  []anthropicMessage `json:"messages"`
	Tools     []anthropicTool    `json:"tools"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anthropicTool struct {
	Type           string             `json:"type"`
	Name           string             `json:"name"`
	MaxUses        int                `json:"max_uses,omitempty"`
	AllowedDomains []string           `json:"allowed_domains,omitempty"`
	BlockedDomains []string           `json:"blocked_domains,omitempty"`
	UserLocation   *anthropicLocation `json:"user_location,omitempty"`
	AllowedCallers []string           `json:"allowed_callers,omitempty"`
}

type anthropicLocation struct {
	Type    string `json:"type"`
	Country string `json:"country"`
}

type anthropicResponse struct {
	Type  string `json:"type"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	StopReason string           `json:"stop_reason"`
	Content    []anthropicBlock `json:"content"`
	Usage      struct {
		InputTokens   int `json:"input_tokens"`
		OutputTokens  int `json:"output_tokens"`
		ServerToolUse *struct {
			WebSearchRequests *int `json:"web_search_requests"`
		} `json:"server_tool_use"`
	} `json:"usage"`
}

type anthropicBlock struct {
	Type      string `json:"type"`
	Text      string `json:"text"`
	Citations []struct {
		Type      string `json:"type"`
		URL       string `json:"url"`
		Title     string `json:"title"`
		CitedText string `json:"cited_text"`
	} `json:"citations"`
	// Content of a web_search_tool_result: a list of results, or an error object.
	Content anthropicToolContent `json:"content"`
}

// anthropicToolContent is the content of a server tool result block: a list of
// web_search_result entries, or an error object such as
// {"type": "web_search_tool_result_error", "error_code": "too_many_requests"}. It is
// decoded in place, without keeping a copy of the (large, encrypted) raw results.
type anthropicToolContent struct {
	Results   []anthropicResult
	ErrorCode string
	IsError   bool
}

func (c *anthropicToolContent) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || string(b) == "null":
		return nil
	case b[0] == '[':
		return json.Unmarshal(b, &c.Results)
	case b[0] == '{':
		var fail struct {
			ErrorCode string `json:"error_code"`
		}
		if err := json.Unmarshal(b, &fail); err != nil {
			return err
		}
		c.IsError, c.ErrorCode = true, fail.ErrorCode
		return nil
	}
	// Other tools' results (code execution stdout as a string, …) are not ours.
	return nil
}

type anthropicResult struct {
	Type    string  `json:"type"`
	URL     string  `json:"url"`
	Title   string  `json:"title"`
	PageAge *string `json:"page_age"`
}

func (e *anthropic) Search(ctx context.Context, q Query) (*Result, error) {
	if e.key == "" {
		return nil, missingKey(Config{ID: e.id, APIKeyEnv: e.keyEnv})
	}
	tool := anthropicTool{Type: e.opts.ToolVersion, Name: "web_search", MaxUses: e.opts.MaxUses}
	if e.opts.ToolVersion > "web_search_20250305" {
		tool.AllowedCallers = []string{"direct"}
	}
	if len(q.AllowedDomains) > 0 {
		tool.AllowedDomains = q.AllowedDomains
	} else {
		tool.BlockedDomains = q.BlockedDomains
	}
	if len(q.Country) == 2 {
		tool.UserLocation = &anthropicLocation{Type: "approximate", Country: strings.ToUpper(q.Country)}
	}
	user, _ := json.Marshal([]map[string]string{{"type": "text", "text": q.Query}})
	req := anthropicRequest{
		Model:     e.model,
		MaxTokens: e.opts.MaxTokens,
		System:    groundedAInstructions(q),
		Messages:  []anthropicMessage{{Role: "user", Content: user}},
		Tools:     []anthropicTool{tool},
	}
	h := header("x-api-key", e.key)
	h.Set("anthropic-version", "2023-06-01")

	var bodies [][]byte
	var assistant []json.RawMessage
	for turn := 0; ; turn++ {
		body, _, err := e.do(ctx, request{path: "/v1/messages", header: h, body: req})
		if err != nil {
			var ee *Error
			if errors.As(err, &ee) && ee.Kind == BadRequest && strings.Contains(ee.Message, "credit balance") {
				ee.Kind = Quota
			}
			// A failed continuation does not void the searches already paid for:
			// answer with what Claude had so far, unless the caller gave up.
			if len(bodies) > 0 && ctx.Err() == nil {
				if res, perr := e.parse(q, bodies); perr == nil {
					res.warnf("continuing Claude's paused turn failed (%s); this is the answer so far", AsError(e.id, err).Kind)
					return res, nil
				}
			}
			return nil, err
		}
		bodies = append(bodies, body)
		var peek struct {
			StopReason string            `json:"stop_reason"`
			Content    []json.RawMessage `json:"content"`
		}
		if err := e.decode(body, &peek); err != nil {
			return nil, err
		}
		if peek.StopReason != "pause_turn" || turn >= anthropicMaxContinuations {
			break
		}
		// Continue the paused turn: the user message and everything the assistant said
		// so far, exactly as received.
		assistant = append(assistant, peek.Content...)
		content, err := json.Marshal(assistant)
		if err != nil {
			return nil, &Error{Kind: Decode, Engine: e.id, Message: "re-encoding paused content: " + err.Error()}
		}
		req.Messages = []anthropicMessage{req.Messages[0], {Role: "assistant", Content: content}}
	}
	return e.parse(q, bodies)
}

// parse reads the responses of one search, in call order (the first, then one per
// pause_turn continuation), as one assistant turn.
func (e *anthropic) parse(q Query, bodies [][]byte) (*Result, error) {
	if len(bodies) == 0 {
		return nil, &Error{Kind: Decode, Engine: e.id, Message: "no response body"}
	}
	res := &Result{}
	var blocks []anthropicBlock
	billed, reported := 0, false
	stop := ""
	for _, b := range bodies {
		var resp anthropicResponse
		if err := e.decode(b, &resp); err != nil {
			return nil, err
		}
		if resp.Type == "error" && resp.Error != nil {
			return nil, e.inBandError(resp.Error.Type, resp.Error.Message)
		}
		if resp.Type != "message" && resp.Content == nil {
			return nil, &Error{Kind: Decode, Engine: e.id, Message: "not a Messages API response (no content)"}
		}
		blocks = append(blocks, resp.Content...)
		stop = resp.StopReason
		res.Usage.InputTokens += resp.Usage.InputTokens
		res.Usage.OutputTokens += resp.Usage.OutputTokens
		if stu := resp.Usage.ServerToolUse; stu != nil && stu.WebSearchRequests != nil {
			billed += *stu.WebSearchRequests
			reported = true
		}
	}

	// Pass 1: the results of every search, in order, one source per distinct URL.
	var results []anthropicResult
	index := map[string]int{} // URL -> 1-based source number
	var failures []string
	searchesOK := 0
	for _, b := range blocks {
		if b.Type != "web_search_tool_result" {
			continue
		}
		if b.Content.IsError {
			if b.Content.ErrorCode != "" {
				failures = append(failures, b.Content.ErrorCode)
			}
			continue
		}
		rs := b.Content.Results
		searchesOK++
		for _, r := range rs {
			if r.URL == "" || index[r.URL] > 0 {
				continue
			}
			results = append(results, r)
			index[r.URL] = len(results)
			res.Citation.Sources = append(res.Citation.Sources, Source{Web: Web{Title: r.Title, URI: r.URL}})
		}
	}
	if len(results) == 0 && len(failures) > 0 {
		return nil, e.toolError(failures[len(failures)-1])
	}
	if len(failures) > 0 {
		res.warnf("%d of %d web searches failed (%s); the answer rests on the others", len(failures), len(failures)+searchesOK, strings.Join(failures, ", "))
	}

	// Pass 2: the answer. A run of uncited text blocks right before a tool call is
	// narration ("Let me search for …"), not answer, and is left out.
	var text strings.Builder
	var citedOrder []int
	cited := map[int]bool{}
	snippet := map[int]string{}
	for i := 0; i < len(blocks); i++ {
		if blocks[i].Type != "text" {
			continue
		}
		j := i
		anyCited := false
		for j < len(blocks) && (blocks[j].Type == "text" || blocks[j].Type == "thinking" || blocks[j].Type == "redacted_thinking") {
			if len(blocks[j].Citations) > 0 {
				anyCited = true
			}
			j++
		}
		if !anyCited && j < len(blocks) && anthropicToolBlock(blocks[j].Type) {
			i = j - 1
			continue
		}
		for k := i; k < j; k++ {
			b := blocks[k]
			if b.Type != "text" {
				continue
			}
			var nums []int
			for _, c := range b.Citations {
				if c.URL == "" {
					continue
				}
				n := index[c.URL]
				if n == 0 {
					res.Citation.Sources = append(res.Citation.Sources, Source{Web: Web{Title: c.Title, URI: c.URL}})
					n = len(res.Citation.Sources)
					index[c.URL] = n
				}
				nums = append(nums, n)
				if !cited[n] {
					cited[n] = true
					citedOrder = append(citedOrder, n)
				}
				if snippet[n] == "" && c.CitedText != "" {
					snippet[n] = html.UnescapeString(c.CitedText)
				}
			}
			t := groundedAInsert(b.Text, nil) // escapes any "[n]" Claude wrote itself
			if len(nums) == 0 {
				text.WriteString(t)
				continue
			}
			body := strings.TrimRight(t, " \t\r\n")
			text.WriteString(body)
			text.WriteString(MarkerText(nums))
			text.WriteString(t[len(body):])
		}
		i = j - 1
	}
	res.Summary = text.String()
	if stop == "pause_turn" {
		res.warnf("Claude had not finished searching when its turn was cut short; the answer may be incomplete")
	}

	// Hits: the cited pages first, in order of first citation, then the other results.
	now := e.now()
	hit := func(n int) Hit {
		s := res.Citation.Sources[n-1].Web
		h := Hit{Title: s.Title, URL: s.URI, Snippet: snippet[n]}
		if n <= len(results) && results[n-1].PageAge != nil {
			h.Published = readDate(*results[n-1].PageAge, now) // "December 21, 2015" or "2 days ago"
		}
		return h
	}
	for _, n := range citedOrder {
		res.Hits = append(res.Hits, hit(n))
	}
	for n := 1; n <= len(results); n++ {
		if !cited[n] {
			res.Hits = append(res.Hits, hit(n))
		}
	}

	// Sources: uncited results past the wanted count are dropped (finish removes
	// sources without a URI and renumbers the markers).
	for n := q.Count + 1; n <= len(res.Citation.Sources); n++ {
		if !cited[n] {
			res.Citation.Sources[n-1].Web.URI = ""
		}
	}
	// Both domain lists: only allowed_domains was sent; the shared normalization
	// applies the blocked ones to the results.
	if len(q.AllowedDomains) > 0 && len(q.BlockedDomains) > 0 {
		res.warnf("Anthropic's web search takes allowed or blocked domains, not both: allowed_domains was sent and blocked_domains applied to the results afterwards")
	}

	res.Usage.Searches = searchesOK
	if reported {
		res.Usage.Searches = billed
	}
	res.Usage.CostUSD = e.price * float64(res.Usage.Searches)
	return res, nil
}

func anthropicToolBlock(t string) bool {
	return t == "server_tool_use" || t == "tool_use" || strings.HasSuffix(t, "_tool_result")
}

// toolError turns the error code of a failed web_search_tool_result into an *Error.
func (e *anthropic) toolError(code string) *Error {
	err := &Error{Kind: BadRequest, Engine: e.id, Message: "web search failed: " + code}
	switch code {
	case "too_many_requests":
		err.Kind = RateLimited
	case "unavailable":
		err.Kind = Unavailable
	}
	return err
}

// inBandError classifies an error envelope that arrived with a 2xx status.
func (e *anthropic) inBandError(typ, msg string) *Error {
	err := &Error{Kind: BadRequest, Engine: e.id, Message: e.redact(truncate(typ+": "+msg, 300))}
	switch typ {
	case "rate_limit_error":
		err.Kind = RateLimited
	case "overloaded_error", "api_error", "timeout_error":
		err.Kind = Unavailable
	case "authentication_error", "permission_error":
		err.Kind = Auth
	case "billing_error":
		err.Kind = Quota
	}
	return err
}
