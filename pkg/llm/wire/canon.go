// Package wire is what the fleet's wire protocols share: one canonical conversation
// model (messages, content parts, client tool calls and results, server-tool calls
// and their results, citations, usage, stop reasons), the codec interfaces, and what
// every protocol's codec uses (reasoning state and its seal, files and PDF text, the
// trace of searches, the stored formats).
//
// Each protocol is one package beside this one and serves both directions:
// openaichat (OpenAI Chat Completions, with Kimi's and GLM's own search), responses
// (OpenAI Responses), anthropic (Anthropic Messages) and gemini (model side only). A
// ClientCodec is a protocol as a client speaks it to the ingress; a ModelAPI is a
// protocol as the fleet speaks it to a main model (upstream.Caller calls them). The
// chat worker builds each hop's model request in canonical form and the model caller
// encodes it once with the model's codec; the answer comes back as a Turn (turn.go),
// which the chain stores as it is and sends back on later hops. The job's request is
// stored in canonical form with its client's protocol (stored.go); its final answer
// is stored canonical (answer.go) and rendered with the client's codec when read.
package wire

import (
	"encoding/json"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/searchfleet/searchfleet/pkg/llm"
)

// Protocol names a wire protocol. The names are stored with jobs: never rename one.
type Protocol string

const (
	OpenAIChat        Protocol = "openai.chat"
	OpenAIResponses   Protocol = "openai.responses"
	AnthropicMessages Protocol = "anthropic.messages"
	// Gemini is the Gemini generateContent protocol (model side only).
	Gemini Protocol = "gemini"
)

// Role is who speaks a message.
type Role string

const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	// RoleTool carries client tool results (Chat "tool" messages, Responses
	// function_call_output items); Anthropic puts them in user messages instead.
	RoleTool Role = "tool"
)

// Request is a conversation request in canonical form.
type Request struct {
	Model string `json:"model"`
	// System is the system prompt (Chat system/developer messages before the first
	// turn, Responses instructions, Anthropic system).
	System   string    `json:"system,omitempty"`
	Messages []Message `json:"messages"`
	// Tools are the client's function tools: returned to it when called, never run.
	Tools      []Tool      `json:"tools,omitempty"`
	ToolChoice *ToolChoice `json:"tool_choice,omitempty"`
	// Search is the request's own web search settings (nil: none declared).
	Search *llm.SearchOptions `json:"search,omitempty"`
	// MaxTokens bounds the answer (0: the model's default).
	MaxTokens         int      `json:"max_tokens,omitempty"`
	Temperature       *float64 `json:"temperature,omitempty"`
	TopP              *float64 `json:"top_p,omitempty"`
	Stop              []string `json:"stop,omitempty"`
	ParallelToolCalls *bool    `json:"parallel_tool_calls,omitempty"`
	// ResponseFormat is a Chat response_format (Responses text.format maps onto it).
	ResponseFormat json.RawMessage `json:"response_format,omitempty"`
	Stream         bool            `json:"stream,omitempty"`
	// Background asks for an answer fetched later (Responses background mode).
	Background bool `json:"background,omitempty"`
	// Reasoning is how much the model should think (nil: its default).
	Reasoning *ReasoningConfig `json:"reasoning,omitempty"`
	// EncryptedReasoning asks for the model's reasoning state in the answer, sealed
	// (Responses include reasoning.encrypted_content: Response.SealReasoning).
	EncryptedReasoning bool `json:"encrypted_reasoning,omitempty"`
	// Params are parameters of the request's own protocol the canonical model does not
	// name (Chat's seed, logprobs…): forwarded only to a model of the same protocol.
	Params map[string]json.RawMessage `json:"params,omitempty"`
	// Notes say which of the request's settings the fleet cannot honour; the answer
	// repeats them (Search.Unhonoured are added to them).
	Notes []string `json:"notes,omitempty"`
}

// Message is one turn.
type Message struct {
	Role  Role   `json:"role"`
	Parts []Part `json:"parts"`
}

// PartKind says what a Part holds.
type PartKind string

const (
	PartText         PartKind = "text"
	PartImage        PartKind = "image"
	PartFile         PartKind = "file"          // File: a document the client sent
	PartToolCall     PartKind = "tool_call"     // Call: a client tool call
	PartToolResult   PartKind = "tool_result"   // Result: a client tool's result
	PartServerCall   PartKind = "server_call"   // Server: a web_search the fleet ran
	PartServerResult PartKind = "server_result" // Search: what that search found
	PartReasoning    PartKind = "reasoning"     // Reasoning: a model's reasoning state
)

// Part is one piece of a message's content. Kind says which field is set.
type Part struct {
	Kind PartKind `json:"kind"`
	// Text and its citations (PartText).
	Text      string        `json:"text,omitempty"`
	Citations []Citation    `json:"citations,omitempty"`
	Image     *Image        `json:"image,omitempty"`
	File      *File         `json:"file,omitempty"`
	Call      *ToolCall     `json:"call,omitempty"`
	Result    *ToolResult   `json:"result,omitempty"`
	Server    *ServerCall   `json:"server,omitempty"`
	Search    *SearchResult `json:"search,omitempty"`
	Reasoning *Reasoning    `json:"reasoning,omitempty"`
}

// Image is an image part: a URL (http(s) or data:) or base64 data with its type.
type Image struct {
	URL       string `json:"url,omitempty"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
}

// URLOrData is the image's URL, or its data as a data: URL.
func (im *Image) URLOrData() string {
	if im.URL != "" {
		return im.URL
	}
	return "data:" + im.MediaType + ";base64," + im.Data
}

// Inline returns an image's base64 data and media type: its Data, or the payload of a
// data: URL. ok is false for an image given by an http(s) URL.
func (im *Image) Inline() (media, data string, ok bool) {
	if rest, isData := strings.CutPrefix(im.URL, "data:"); isData {
		meta, payload, _ := strings.Cut(rest, ",")
		media, _, _ = strings.Cut(meta, ";")
		return media, payload, true
	}
	return im.MediaType, im.Data, im.URL == ""
}

// ToolCall is a client tool call. Arguments is the JSON text exactly as the model
// wrote it.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolResult is the result of a client tool call.
type ToolResult struct {
	CallID  string `json:"call_id"`
	Parts   []Part `json:"parts,omitempty"` // text and images
	IsError bool   `json:"is_error,omitempty"`
}

// ServerCall is a server-tool call the fleet ran: web_search (Query) or web_fetch
// (Name "web_fetch", URL).
type ServerCall struct {
	ID    string `json:"id"`
	Name  string `json:"name,omitempty"`
	Query string `json:"query,omitempty"`
	URL   string `json:"url,omitempty"`
	// Action is the provider's kind of call where its search tool has several
	// (OpenAI: "search", "open_page", "find_in_page"; "" for a search).
	Action string `json:"action,omitempty"`
}

// FetchName is the Name of a web_fetch ServerCall.
const FetchName = "web_fetch"

// IsFetch reports whether c is a web_fetch call.
func (c *ServerCall) IsFetch() bool { return c != nil && c.Name == FetchName }

// FetchedPage is what one server web_fetch read (SearchResult.Page).
type FetchedPage struct {
	URL   string `json:"url"`
	Title string `json:"title,omitempty"`
	// Text is the beginning of the page's readable text.
	Text        string `json:"text,omitempty"`
	Kind        string `json:"kind,omitempty"`
	Truncated   bool   `json:"truncated,omitempty"`
	RetrievedAt string `json:"retrieved_at,omitempty"`
}

// SearchResult is what one server web_search returned.
type SearchResult struct {
	CallID  string   `json:"call_id"`
	Sources []Source `json:"sources,omitempty"`
	// Page is set for a web_fetch result that read a page (Sources then holds it).
	Page *FetchedPage `json:"page,omitempty"`
	// Fetch marks a web_fetch result (AddTrace), failed ones included (not stored).
	Fetch bool `json:"-"`
	// Error is set when the search failed.
	Error *SearchError `json:"error,omitempty"`
}

// Source is one search result page.
type Source struct {
	URL   string `json:"url"`
	Title string `json:"title,omitempty"`
	// PageAge is the page's age or date as the engine gave it ("" unknown).
	PageAge string `json:"page_age,omitempty"`
}

// SearchError is a failed search, with an Anthropic-vocabulary code: unavailable,
// too_many_requests, max_uses_exceeded, invalid_tool_input, query_too_long.
type SearchError struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

// Citation ties a span of a text part to a source.
type Citation struct {
	URL   string `json:"url"`
	Title string `json:"title,omitempty"`
	// CitedText is the cited passage, where known.
	CitedText string `json:"cited_text,omitempty"`
	// Start and End are character (code point) offsets of the cited span in the part's
	// text; both -1 when the citation covers the whole part (Anthropic).
	Start int `json:"start"`
	End   int `json:"end"`
}

// Tool is a client function tool.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is the JSON schema of the arguments.
	Parameters json.RawMessage `json:"parameters,omitempty"`
	Strict     *bool           `json:"strict,omitempty"`
}

// Decl is the tool as the protocols declare a function: its name, its description and
// its schema under params, each only when set.
func (t Tool) Decl(params string) map[string]any {
	d := map[string]any{"name": t.Name}
	if t.Description != "" {
		d["description"] = t.Description
	}
	if !IsNull(t.Parameters) {
		d[params] = t.Parameters
	}
	return d
}

// ToolChoice is how the model may use tools: Mode auto, none, required (any tool) or
// tool (the one named).
type ToolChoice struct {
	Mode string `json:"mode"`
	Name string `json:"name,omitempty"`
}

// StopReason is why an answer ended.
type StopReason string

const (
	StopEndTurn   StopReason = "end_turn"
	StopToolUse   StopReason = "tool_use"
	StopMaxTokens StopReason = "max_tokens"
	StopRefusal   StopReason = "refusal"
)

// Status is where a stored answer is.
type Status string

const (
	StatusQueued     Status = "queued"
	StatusInProgress Status = "in_progress"
	StatusCompleted  Status = "completed"
	StatusFailed     Status = "failed"
	StatusCancelled  Status = "cancelled"
)

// Usage is what an answer cost.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	// WebSearches counts the searches that ran (failed ones are not billed);
	// WebFetches the pages fetched.
	WebSearches int `json:"web_searches,omitempty"`
	WebFetches  int `json:"web_fetches,omitempty"`
	// SearchesReported is the provider's own count of its searches, where the answer
	// reports one (OpenAI tool_usage.web_search.num_requests); 0 when it does not.
	SearchesReported int `json:"searches_reported,omitempty"`
	// Spend is what the job spent (nil until it completed): every protocol reports
	// it as usage.searchfleet.
	Spend *Spend `json:"spend,omitempty"`
}

// Spend is a job's searches and what they and its model turns cost, in US dollars.
// Searches were paid for (an engine ran them) and Fetches made (the page was read);
// SearchesCached and FetchesCached were answered at no cost from a stored result (the
// fleet's cache, an identical search in flight, the job's or its batch's record, the
// record of the job a replay replays).
type Spend struct {
	Searches       int     `json:"searches"`
	SearchesCached int     `json:"searches_cached"`
	Fetches        int     `json:"fetches"`
	FetchesCached  int     `json:"fetches_cached"`
	SearchCostUSD  float64 `json:"search_cost_usd"`
	ModelCostUSD   float64 `json:"model_cost_usd"`
	CostUSD        float64 `json:"cost_usd"`
}

// WithSpend adds usage.searchfleet to a protocol's usage object when the job's spend
// is known. The SDKs keep unknown usage fields (openai-go in JSON.ExtraFields,
// anthropic-sdk-go likewise), so clients read it without a custom type.
func WithSpend(usage map[string]any, u Usage) map[string]any {
	if u.Spend != nil {
		usage["searchfleet"] = u.Spend
	}
	return usage
}

// Response is an answer in canonical form. A completed job stores its answer as one
// (EncodeAnswer); the fields tagged "-" are the job record's or the request's, set
// when the answer is read.
type Response struct {
	ID      string    `json:"id,omitempty"`
	JobID   string    `json:"job_id,omitempty"`
	Model   string    `json:"model,omitempty"`
	Created time.Time `json:"created"`
	Status  Status    `json:"status,omitempty"`
	// Content is the assistant's output in order: server calls and their results,
	// text with citations, client tool calls.
	Content []Part     `json:"content"`
	Stop    StopReason `json:"stop,omitempty"`
	// Paused is set when the answer stopped before it was done (Anthropic's
	// pause_turn): a Continuer resumes it.
	Paused bool `json:"paused,omitempty"`
	// StopDetail is the provider's own word for why the answer stopped where it says
	// more than Stop (Gemini's finishReason "SAFETY", "RECITATION"; for a prompt
	// Gemini blocked before any answer, "blocked: " and its blockReason; OpenAI
	// Responses: "refusal" when the model refused, "incomplete: " and the reason).
	StopDetail string `json:"stop_detail,omitempty"`
	Usage      Usage  `json:"usage"`
	// Sources are the sources the answer's [n] markers number (the fleet's extension
	// of a Chat answer); used to title the search results.
	Sources []Source `json:"sources,omitempty"`
	// Notes are the request's settings the fleet could not honour.
	Notes []string `json:"notes,omitempty"`
	// Chain is what the fleet's search loop did for the answer (nil for a model's
	// own answer).
	Chain *Chain `json:"chain,omitempty"`
	// Error is why a failed job failed.
	Error *Error `json:"-"`
	// Finished is when the job ended (zero while it runs).
	Finished time.Time `json:"-"`
	// Seal seals a reasoning part's state for the client (SealReasoning; nil: the
	// client did not ask for it).
	Seal func(*Reasoning) string `json:"-"`
	// Echo is what the answer repeats of its request, by top-level field, as the
	// client sent it (ResponsesEcho); nil: the protocol's defaults.
	Echo map[string]json.RawMessage `json:"-"`
}

// Chain is what the fleet's search loop did for a job's answer: a Chat answer's
// searchfleet extension.
type Chain struct {
	// Hops is the number of model calls.
	Hops int `json:"hops"`
	// Searches are the billed searches (a refused or failed search is not one);
	// Fetches the pages read.
	Searches  int            `json:"searches"`
	Fetches   int            `json:"fetches,omitempty"`
	Citations CitationCounts `json:"citations"`
}

// CitationCounts is what checking an answer's [n] markers found: markers cited,
// those that cite a retrieved source, and those removed because they cite none.
type CitationCounts struct {
	Cited   int `json:"cited"`
	Valid   int `json:"valid"`
	Removed int `json:"removed"`
}

// JoinCited joins the text parts of parts and calls cite with each citation and its
// span in code points of the joined text (a citation of the whole part spans it).
func JoinCited(parts []Part, cite func(c Citation, start, end int)) string {
	var b strings.Builder
	chars := 0
	for _, p := range parts {
		if p.Kind != PartText {
			continue
		}
		n := utf8.RuneCountInString(p.Text)
		for _, c := range p.Citations {
			start, end := c.Start, c.End
			if start < 0 {
				start, end = 0, n
			}
			cite(c, chars+start, chars+end)
		}
		b.WriteString(p.Text)
		chars += n
	}
	return b.String()
}

// Text returns the answer's text parts joined.
func (r *Response) Text() string { return JoinText(r.Content) }

// JoinText is the text parts of parts joined (JoinCited without the citations' spans,
// which it counts code points for).
func JoinText(parts []Part) string {
	var b strings.Builder
	for _, p := range parts {
		if p.Kind == PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// TextOnly reports whether every part of parts is text.
func TextOnly(parts []Part) bool {
	return !slices.ContainsFunc(parts, func(p Part) bool { return p.Kind != PartText })
}

// Error is a request the fleet refuses or a job that failed, rendered by each codec in
// its protocol's error shape.
type Error struct {
	// Status is the HTTP status.
	Status int
	// Type is an OpenAI error type (invalid_request_error, server_error…); empty means
	// derived from Status. Anthropic types are always derived from Status.
	Type    string
	Code    string
	Param   string
	Message string
}

func (e *Error) Error() string { return e.Message }

// Event is one server-sent event of a stream: its event name ("" for a data-only
// event, as Chat sends them) and its JSON data. An event without data is a comment
// line (Comment, or "keep-alive"), which every SSE client ignores.
type Event struct {
	Name    string
	Data    []byte
	Comment string
}
