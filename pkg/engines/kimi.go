package engines

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// kimi is Moonshot Kimi with its builtin $web_search function (POST
// {base}/chat/completions, bearer key, default base https://api.moonshot.cn/v1,
// default model kimi-k2-turbo-preview). The protocol takes two calls or more
// (WIRE_FORMATS.md §5): the model answers finish_reason "tool_calls" naming
// $web_search with an opaque arguments string; we send the assistant message back
// with a "tool" message whose content is that arguments string verbatim; Moonshot runs
// the search and the model answers. The search results never appear in the response:
// the sources are the markdown links of the final answer, which the default system
// prompt asks for.
//
// Options: {"systemPrompt": "…"}. Pricing: ¥0.03 per $web_search call (docs) at
// glmUSDPerCNY; tokens, which include the search results on the final round, are
// reported in Usage but not priced.
type kimi struct {
	client
	model      string
	opts       kimiOptions
	price      float64
	noThinking bool // send thinking:{type:disabled} (kimi-k2.5 and later reject $web_search while thinking)
}

type kimiOptions struct {
	SystemPrompt string `json:"systemPrompt,omitempty"`
}

// kimiMaxRounds bounds the tool-call loop: one search usually suffices, a model that
// is still searching after four rounds is cut off.
const kimiMaxRounds = 4

// kimiSystemPrompt is the default instruction: the answer's links are the only way the
// sources come back, so it asks for them.
const kimiSystemPrompt = "Use the $web_search tool to search the web for the user's query, then answer concisely in the language of the query. " +
	"Cite every page you use as a markdown link [page title](url) right after the statement it supports."

// kimiThinkingRE matches the models that think by default and must have it disabled
// for $web_search.
var kimiThinkingRE = regexp.MustCompile(`^kimi-k2\.[5-9]`)

func newKimi(cfg Config, hc *http.Client) (Engine, error) {
	e := &kimi{client: newClient(cfg, hc, "https://api.moonshot.cn/v1"), model: cfg.Model}
	if err := cfg.options(&e.opts); err != nil {
		return nil, err
	}
	if e.model == "" {
		e.model = "kimi-k2-turbo-preview"
	}
	if e.opts.SystemPrompt == "" {
		e.opts.SystemPrompt = kimiSystemPrompt
	}
	e.noThinking = kimiThinkingRE.MatchString(e.model)
	e.price = cfg.price(0.03 * glmUSDPerCNY)
	return e, nil
}

func (e *kimi) Name() string { return e.id }

type kimiRequest struct {
	Model    string        `json:"model"`
	Messages []kimiMessage `json:"messages"`
	Tools    []kimiTool    `json:"tools"`
	Thinking *glmThinking  `json:"thinking,omitempty"`
}

type kimiMessage struct {
	Role             string          `json:"role"`
	Content          string          `json:"content"`
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	ToolCalls        json.RawMessage `json:"tool_calls,omitempty"`
	ToolCallID       string          `json:"tool_call_id,omitempty"`
	Name             string          `json:"name,omitempty"`
}

type kimiTool struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

type kimiResponse struct {
	Choices []struct {
		FinishReason string `json:"finish_reason"`
		Message      struct {
			Content          string          `json:"content"`
			ReasoningContent string          `json:"reasoning_content"`
			ToolCalls        json.RawMessage `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error *openrouterErrorBody `json:"error"`
}

type kimiToolCall struct {
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// kimiWebSearch is the builtin function's name.
const kimiWebSearch = "$web_search"

func (e *kimi) Search(ctx context.Context, q Query) (*Result, error) {
	if e.key == "" {
		return nil, &Error{Kind: Auth, Engine: e.id, Message: "no API key configured"}
	}
	tool := kimiTool{Type: "builtin_function"}
	tool.Function.Name = kimiWebSearch
	req := kimiRequest{
		Model: e.model,
		Messages: []kimiMessage{
			{Role: "system", Content: e.opts.SystemPrompt},
			{Role: "user", Content: q.Query},
		},
		Tools: []kimiTool{tool}, // on every request, or the echo is refused
	}
	if e.noThinking {
		req.Thinking = &glmThinking{Type: "disabled"}
	}
	var bodies [][]byte
	for range kimiMaxRounds {
		body, _, err := e.do(ctx, request{path: "/chat/completions", header: bearer(e.key), body: req})
		if err != nil {
			return nil, err
		}
		bodies = append(bodies, body)
		resp, calls, err := e.decodeRound(body)
		if err != nil {
			return nil, err
		}
		if len(calls) == 0 {
			break
		}
		m := resp.Choices[0].Message
		req.Messages = append(req.Messages, kimiMessage{Role: "assistant", Content: m.Content, ReasoningContent: m.ReasoningContent, ToolCalls: m.ToolCalls})
		for _, c := range calls {
			content := c.Function.Arguments // echoed verbatim: Moonshot reads its search_id back
			if c.Function.Name != kimiWebSearch {
				content = `{"error":"no such tool"}`
			}
			req.Messages = append(req.Messages, kimiMessage{Role: "tool", ToolCallID: c.ID, Name: c.Function.Name, Content: content})
		}
	}
	return e.parse(q, bodies)
}

// decodeRound reads one answer and the tool calls it asks for (none unless the finish
// reason is tool_calls).
func (e *kimi) decodeRound(body []byte) (*kimiResponse, []kimiToolCall, error) {
	var resp kimiResponse
	if err := e.decode(body, &resp); err != nil {
		return nil, nil, err
	}
	if resp.Error != nil && len(resp.Choices) == 0 {
		return nil, nil, openrouterInBand(&e.client, resp.Error, body)
	}
	if len(resp.Choices) == 0 || resp.Choices[0].FinishReason != "tool_calls" || len(resp.Choices[0].Message.ToolCalls) == 0 {
		return &resp, nil, nil
	}
	var calls []kimiToolCall
	if err := e.decode(resp.Choices[0].Message.ToolCalls, &calls); err != nil {
		return nil, nil, err
	}
	return &resp, calls, nil
}

// parse reads the rounds in call order: usage is summed, every $web_search call is
// counted and billed, and the last answer is the summary.
func (e *kimi) parse(_ Query, bodies [][]byte) (*Result, error) {
	res := &Result{}
	var last *kimiResponse
	stillSearching := false
	for _, body := range bodies {
		resp, calls, err := e.decodeRound(body)
		if err != nil {
			return nil, err
		}
		res.Usage.InputTokens += resp.Usage.PromptTokens
		res.Usage.OutputTokens += resp.Usage.CompletionTokens
		for _, c := range calls {
			if c.Function.Name == kimiWebSearch {
				res.Usage.Searches++
			}
		}
		last, stillSearching = resp, len(calls) > 0
	}
	res.Usage.CostUSD = e.price * float64(res.Usage.Searches)
	if last == nil || len(last.Choices) == 0 {
		return res, nil
	}
	if stillSearching {
		res.warnf("Kimi was still searching after %d rounds; the answer is missing", kimiMaxRounds)
		return res, nil
	}
	if last.Choices[0].FinishReason == "length" {
		res.warnf("the answer was cut at the model's token limit")
	}
	res.Summary, res.Citation.Sources, res.Hits = kimiCite(last.Choices[0].Message.Content)
	return res, nil
}

// kimiLinkRE matches a markdown link or image: [text](url), [text](<url>),
// [text](url "title"). URLs may hold one level of parentheses (Wikipedia's
// "Foo_(bar)"). RE2 keeps it linear on any input.
var kimiLinkRE = regexp.MustCompile(`(!?)\[([^\[\]\n]*)\]\(\s*<?(https?://(?:[^\s()<>]|\([^\s()<>]*\))+)>?(?:\s+"[^"\n]*")?\s*\)`)

// kimiBareRE matches a bare http(s) URL; trailing punctuation is trimmed afterwards.
var kimiBareRE = regexp.MustCompile(`https?://[^\s<>()\[\]{}"'` + "`" + `，。；！？、（）【】《》]+`)

// kimiNumericRE matches link texts that are citation numbers ("1", "^2", "[3]").
var kimiNumericRE = regexp.MustCompile(`^\^?[0-9]{1,3}$`)

// MarkLinks writes text to b with its markdown links cited: each link stays and gets
// the marker "[n]" of n = number(url, title) right after it; a link whose text is
// only a number (a citation-style link) becomes its marker alone; an image stays as
// it is, no source. The text between links goes through plain. The kimi engine and
// Kimi's native search (pkg/llm/nativechat) read answers' links with it.
func MarkLinks(b *strings.Builder, text string, plain func(string), number func(url, title string) int) {
	prev := 0
	for _, m := range kimiLinkRE.FindAllStringSubmatchIndex(text, -1) {
		plain(text[prev:m[0]])
		prev = m[1]
		link := text[m[0]:m[1]]
		if m[3] > m[2] { // "!": an image
			b.WriteString(link)
			continue
		}
		title := strings.Trim(text[m[4]:m[5]], " *_`<>")
		url := text[m[6]:m[7]]
		if title == url {
			title = ""
		}
		if kimiNumericRE.MatchString(strings.Trim(title, "[]")) {
			b.WriteString("[" + strconv.Itoa(number(url, "")) + "]")
			continue
		}
		b.WriteString(link)
		b.WriteString("[" + strconv.Itoa(number(url, title)) + "]")
	}
	plain(text[prev:])
}

// HasLink reports whether text has a markdown link (or image) MarkLinks reads.
func HasLink(text string) bool { return kimiLinkRE.MatchString(text) }

// kimiCite numbers the pages an answer links to and marks each link: sources are the
// unique URLs of its markdown links and bare URLs in order of first appearance, and
// "[n]" goes right after each link, which stays. A link whose text is only a number
// (a citation-style link) is replaced by its marker, and [n] markers the model wrote
// itself are removed, since they number nothing we know. Images are not sources. Used
// by every kind whose sources are the answer's links (Kimi; OpenRouter without
// annotations).
func kimiCite(text string) (string, []Source, []Hit) {
	var (
		b       strings.Builder
		sources []Source
		hits    []Hit
		num     = map[string]int{}
	)
	b.Grow(len(text) + 64)
	number := func(url, title string) int {
		if n, ok := num[url]; ok {
			if sources[n-1].Web.Title == "" && title != "" {
				sources[n-1].Web.Title = title
				hits[n-1].Title = title
			}
			return n
		}
		sources = append(sources, Source{Web: Web{Title: title, URI: url}})
		hits = append(hits, Hit{Title: title, URL: url})
		num[url] = len(sources)
		return len(sources)
	}
	// plain copies text outside markdown links: bare URLs get markers, stray markers go.
	plain := func(s string) {
		prev := 0
		for _, m := range kimiBareRE.FindAllStringIndex(s, -1) {
			u := strings.TrimRight(s[m[0]:m[1]], ".,;:!?*_~")
			if len(u) <= len("https://") {
				continue
			}
			end := m[0] + len(u)
			b.WriteString(markerRE.ReplaceAllString(s[prev:m[0]], ""))
			b.WriteString(u)
			b.WriteString(" [")
			b.WriteString(strconv.Itoa(number(u, "")))
			b.WriteString("]")
			prev = end
		}
		b.WriteString(markerRE.ReplaceAllString(s[prev:], ""))
	}
	MarkLinks(&b, text, plain, number)
	return b.String(), sources, hits
}
