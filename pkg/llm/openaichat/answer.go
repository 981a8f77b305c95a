package openaichat

import (
	"cmp"
	"encoding/json"
	"fmt"
	"time"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// chatCompletion is the part of a chat.completion the codec reads, with the fleet's
// extension.
type chatCompletion struct {
	ID      string `json:"id"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content          json.RawMessage  `json:"content"`
			ReasoningContent string           `json:"reasoning_content"`
			Reasoning        json.RawMessage  `json:"searchfleet_reasoning"`
			ToolCalls        []llm.ToolCall   `json:"tool_calls"`
			Annotations      []chatAnnotation `json:"annotations"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		llm.Usage
		Searchfleet *wire.Spend `json:"searchfleet"`
	} `json:"usage"`
	Searchfleet *struct {
		JobID   string `json:"job_id"`
		Sources []struct {
			Title string `json:"title"`
			URL   string `json:"url"`
		} `json:"sources"`
		Warnings []string `json:"warnings"`
	} `json:"searchfleet"`
	// Error is a provider's in-band error envelope: only a model's answer is read
	// for it (ChatModel.DecodeResponse), in the same pass as the rest.
	Error json.RawMessage `json:"error"`
}

var chatStops = map[string]wire.StopReason{"stop": wire.StopEndTurn, "tool_calls": wire.StopToolUse, "function_call": wire.StopToolUse, "length": wire.StopMaxTokens, "content_filter": wire.StopRefusal}

// DecodeResponse reads a chat.completion (a model's, or the chat worker's final answer
// with its url_citation annotations and searchfleet extension).
func (chatCodec) DecodeResponse(body []byte) (*wire.Response, error) {
	var c chatCompletion
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, fmt.Errorf("not a chat completion: %w", err)
	}
	return c.response()
}

// response is a decoded chat.completion in canonical form.
func (c *chatCompletion) response() (*wire.Response, error) {
	if len(c.Choices) == 0 {
		return nil, fmt.Errorf("chat completion has no choices")
	}
	ch := c.Choices[0]
	r := &wire.Response{ID: c.ID, Model: c.Model, Status: wire.StatusCompleted, Stop: cmp.Or(chatStops[ch.FinishReason], wire.StopEndTurn),
		Usage: wire.Usage{InputTokens: c.Usage.PromptTokens, OutputTokens: c.Usage.CompletionTokens, Spend: c.Usage.Searchfleet}}
	if c.Created > 0 {
		r.Created = time.Unix(c.Created, 0).UTC()
	}
	if text := llm.Text(ch.Message.Content); text != "" {
		p := wire.Part{Kind: wire.PartText, Text: text}
		for _, a := range ch.Message.Annotations {
			if a.Type != "url_citation" {
				continue
			}
			u := a.URLCitation
			p.Citations = append(p.Citations, wire.Citation{URL: u.URL, Title: u.Title, Start: u.StartIndex, End: u.EndIndex})
		}
		r.Content = append(r.Content, p)
	}
	for _, tc := range ch.Message.ToolCalls {
		r.Content = append(r.Content, wire.Part{Kind: wire.PartToolCall, Call: &wire.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
	}
	r.Content = reasoningParts(ch.Message.Reasoning, ch.Message.ReasoningContent, r.Content)
	if sf := c.Searchfleet; sf != nil {
		r.JobID = sf.JobID
		r.Notes = sf.Warnings
		for _, s := range sf.Sources {
			r.Sources = append(r.Sources, wire.Source{URL: s.URL, Title: s.Title})
		}
	}
	return r, nil
}

// EncodeResponse renders r as a chat.completion: text joined, citations as
// url_citation annotations, client tool calls.
func (chatCodec) EncodeResponse(r *wire.Response) ([]byte, error) {
	msg, finish := chatMessageOf(r)
	if len(msg.ToolCalls) > 0 && *msg.Content == "" {
		msg.Content = nil // as OpenAI sends a message that only calls tools
	}
	out := chatAnswer{ID: r.ID, Object: "chat.completion", Created: r.Created.Unix(), Model: r.Model,
		Choices: []chatAnswerChoice{{Message: msg, FinishReason: finish}}, Usage: chatUsage(r.Usage)}
	if ext := wire.Extension(r); ext != nil {
		if c := r.Chain; c != nil {
			// A job's answer: the sources its [n] markers (and annotations) refer
			// to, and what the search loop did and checking the citations found.
			sources := make([]map[string]string, 0, len(r.Sources))
			for _, s := range r.Sources {
				sources = append(sources, map[string]string{"title": s.Title, "url": s.URL})
			}
			ext["hops"], ext["searches"], ext["sources"], ext["citations"] = c.Hops, c.Searches, sources, c.Citations
			if c.Fetches > 0 {
				ext["fetches"] = c.Fetches
			}
		}
		out.Searchfleet = ext
	}
	return json.Marshal(&out)
}

// chatAnswer is a chat.completion as the fleet answers it.
type chatAnswer struct {
	ID          string             `json:"id"`
	Object      string             `json:"object"`
	Created     int64              `json:"created"`
	Model       string             `json:"model"`
	Choices     []chatAnswerChoice `json:"choices"`
	Usage       map[string]any     `json:"usage"`
	Searchfleet map[string]any     `json:"searchfleet,omitempty"`
}

type chatAnswerChoice struct {
	Index        int               `json:"index"`
	Message      chatAnswerMessage `json:"message"`
	FinishReason string            `json:"finish_reason"`
	Logprobs     *struct{}         `json:"logprobs"`
}

// chatAnswerMessage is an answer's assistant message: its text (null when it only
// calls tools), citations, the client's tool calls and the model's reasoning.
type chatAnswerMessage struct {
	Role             string               `json:"role"`
	Content          *string              `json:"content"`
	Refusal          *string              `json:"refusal"`
	Annotations      []chatAnnotation     `json:"annotations"`
	ToolCalls        []llm.ToolCall       `json:"tool_calls,omitempty"`
	ReasoningContent *string              `json:"reasoning_content,omitempty"`
	Reasoning        []wire.ChatReasoning `json:"searchfleet_reasoning,omitempty"`
}

type chatAnnotation struct {
	Type        string          `json:"type"`
	URLCitation chatURLCitation `json:"url_citation"`
}

type chatURLCitation struct {
	URL        string `json:"url"`
	Title      string `json:"title"`
	StartIndex int    `json:"start_index"`
	EndIndex   int    `json:"end_index"`
}

func chatMessageOf(r *wire.Response) (chatAnswerMessage, string) {
	msg := chatAnswerMessage{Role: "assistant", Annotations: []chatAnnotation{}}
	text := wire.JoinCited(r.Content, func(c wire.Citation, start, end int) {
		msg.Annotations = append(msg.Annotations, chatAnnotation{Type: "url_citation",
			URLCitation: chatURLCitation{URL: c.URL, Title: c.Title, StartIndex: start, EndIndex: end}})
	})
	for _, p := range r.Content {
		if p.Kind == wire.PartToolCall {
			msg.ToolCalls = append(msg.ToolCalls, p.Call.Chat())
		}
	}
	msg.Content = &text
	msg.ReasoningContent, msg.Reasoning = wire.ChatReasoningValues(r.Content)
	return msg, cmp.Or(wire.ChatFinish[r.Stop], "stop")
}

// chatUsage is a Chat answer's usage, with the job's spend as usage.searchfleet.
func chatUsage(u wire.Usage) map[string]any {
	return wire.WithSpend(map[string]any{"prompt_tokens": u.InputTokens, "completion_tokens": u.OutputTokens, "total_tokens": u.InputTokens + u.OutputTokens}, u)
}

func (chatCodec) NewStream() wire.Stream { return &chatStream{} }

// NewStream returns a Chat stream; with includeUsage it ends with the usage chunk
// (the request's stream_options.include_usage).
func NewStream(includeUsage bool) wire.Stream { return &chatStream{includeUsage: includeUsage} }

// EncodeError renders the error a stream that has sent nothing answers with.
func (*chatStream) EncodeError(e *wire.Error) []byte { return wire.OpenAIError(e) }

// chatStream renders an answer as chat.completion.chunk events and [DONE]: a role
// chunk, the text as it arrives, then the rest of the text, the client tool calls and
// a last chunk with the finish reason and the url_citation annotations (a field of the
// delta, as OpenRouter sends them; the SDKs keep it as an extra field).
//
// Search progress has no place in a Chat chunk that every SDK parses, so it goes out
// as SSE comment lines, which the SDKs (openai-go, openai-node, openai-python) skip:
//
//	: web_search {"status":"searching","id":"0_call_1","query":"…"}
//	: web_search {"status":"completed","id":"0_call_1","sources":5}
//	: web_search {"status":"failed","id":"0_call_1","error":"unavailable"}
type chatStream struct {
	includeUsage bool
	id, model    string
	created      int64
	started      bool   // the role chunk is out
	sent         string // the text sent
	searching    map[string]bool
	searched     map[string]bool
}

func (s *chatStream) chunk(delta map[string]any, finish any) wire.Event {
	return s.event(chatChoice(delta, finish), nil)
}

// chatChoice is a chunk's one choice.
func chatChoice(delta map[string]any, finish any) []any {
	return []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}}
}

// event is a chat.completion.chunk of choices, with usage when it is set.
func (s *chatStream) event(choices []any, usage map[string]any) wire.Event {
	c := map[string]any{"id": s.id, "object": "chat.completion.chunk", "created": s.created, "model": s.model, "choices": choices}
	if usage != nil {
		c["usage"] = usage
	}
	b, _ := json.Marshal(c)
	return wire.Event{Data: b}
}

func (s *chatStream) Start(r *wire.Response) []wire.Event {
	s.id, s.model, s.created = r.ID, r.Model, r.Created.Unix()
	return nil
}

func (s *chatStream) KeepAlive() []wire.Event { return []wire.Event{{}} }

// text renders what text adds to the text sent, if it continues it; final (the
// answer) is sent past what it shares with the text sent in any case.
func (s *chatStream) text(evs []wire.Event, text string, final bool) []wire.Event {
	if !s.started {
		s.started = true
		evs = append(evs, s.chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	}
	if rest, ok := wire.NewText(s.sent, text, final); ok {
		evs = append(evs, s.chunk(map[string]any{"content": rest}, nil))
		s.sent = text
	}
	return evs
}

func (s *chatStream) Update(r *wire.Response) []wire.Event {
	var evs []wire.Event
	if s.searching == nil {
		s.searching, s.searched = map[string]bool{}, map[string]bool{}
	}
	for _, p := range r.Content {
		switch {
		case p.Kind == wire.PartServerCall && !s.searching[p.Server.ID] && p.Server.IsFetch():
			s.searching[p.Server.ID] = true
			evs = append(evs, progressComment(map[string]any{"status": "fetching", "tool": wire.FetchName, "id": p.Server.ID, "url": p.Server.URL}))
		case p.Kind == wire.PartServerCall && !s.searching[p.Server.ID]:
			s.searching[p.Server.ID] = true
			evs = append(evs, progressComment(map[string]any{"status": "searching", "id": p.Server.ID, "query": p.Server.Query}))
		case p.Kind == wire.PartServerResult && !s.searched[p.Search.CallID]:
			s.searched[p.Search.CallID] = true
			if e := p.Search.Error; e != nil {
				evs = append(evs, progressComment(map[string]any{"status": "failed", "id": p.Search.CallID, "error": e.Code}))
			} else {
				evs = append(evs, progressComment(map[string]any{"status": "completed", "id": p.Search.CallID, "sources": len(p.Search.Sources)}))
			}
		case p.Kind == wire.PartText:
			evs = s.text(evs, p.Text, false)
		}
	}
	return evs
}

// progressComment is a search's progress as an SSE comment line.
func progressComment(v map[string]any) wire.Event {
	b, _ := json.Marshal(v)
	return wire.Event{Comment: "web_search " + string(b)}
}

func (s *chatStream) Finish(r *wire.Response) []wire.Event {
	msg, finish := chatMessageOf(r)
	evs := s.text(nil, *msg.Content, true)
	if calls := msg.ToolCalls; len(calls) > 0 {
		items := make([]any, len(calls))
		for i, c := range calls {
			items[i] = map[string]any{"index": i, "id": c.ID, "type": "function", "function": c.Function}
		}
		evs = append(evs, s.chunk(map[string]any{"tool_calls": items}, nil))
	}
	final := map[string]any{}
	if anns := msg.Annotations; len(anns) > 0 {
		final["annotations"] = anns
	}
	var usage map[string]any
	if !s.includeUsage && r.Usage.Spend != nil {
		// No usage chunk follows: the last chunk carries the usage, so every stream
		// ends with what the job cost (usage.searchfleet). Only one chunk has usage,
		// as the SDKs' accumulators add up the usage of every chunk.
		usage = chatUsage(r.Usage)
	}
	evs = append(evs, s.event(chatChoice(final, finish), usage))
	if s.includeUsage {
		evs = append(evs, s.event([]any{}, chatUsage(r.Usage)))
	}
	return append(evs, wire.Event{Data: []byte("[DONE]")})
}

func (s *chatStream) Fail(_ *wire.Response, e *wire.Error) []wire.Event {
	return []wire.Event{{Data: wire.OpenAIError(e)}, {Data: []byte("[DONE]")}}
}

// AnswerJSON is a job's stored answer as the chat.completion a Chat client
// reads (GET /v1/jobs/{id}, a job webhook, a batch's output). What is no model's
// answer (a direct search's or a page fetch's result, which has no format) and empty
// or null stay as they are.
func AnswerJSON(b json.RawMessage) (json.RawMessage, error) {
	if wire.IsNull(b) {
		return b, nil
	}
	format, err := wire.FormatOf(b)
	if err != nil {
		return nil, err
	}
	if format == 0 {
		return b, nil
	}
	r, err := wire.DecodeAnswer(b)
	if err != nil {
		return nil, err
	}
	return Client.EncodeResponse(r)
}
