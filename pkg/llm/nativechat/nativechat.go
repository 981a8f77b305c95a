// Package nativechat forwards the provider's own web search of OpenAI-Chat main models
// whose providers search natively in that protocol: Moonshot Kimi (the
// builtin_function "$web_search", WIRE_FORMATS.md §5) and Zhipu GLM (the "web_search"
// tool, §4a). A Caller wraps the provider's llm.Client: when the chain offers the
// fleet's web_search function, the model gets its provider's search in its place, and
// the answer comes back as the chain expects it from any native-search caller: its
// citations as [n] markers, and what the search did in the message's llm.NativeKey
// report (pkg/chat reads it into the job's trace, sources and cost).
package nativechat

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/searchfleet/searchfleet/pkg/llm"
)

// Kind is a provider family whose own search the fleet forwards in OpenAI Chat.
type Kind string

const (
	// Kimi is Moonshot Kimi's $web_search builtin function.
	Kimi Kind = "kimi"
	// GLM is Zhipu GLM's web_search tool.
	GLM Kind = "glm"
)

// kinds maps a provider's configured kind to its native search.
var kinds = map[string]Kind{"kimi": Kimi, "moonshot": Kimi, "glm": GLM, "zhipu": GLM}

// KindOf returns the native search of a provider kind; false when the fleet cannot
// forward that provider's own search in OpenAI Chat.
func KindOf(providerKind string) (Kind, bool) {
	k, ok := kinds[providerKind]
	return k, ok
}

// Protocol is the protocol name the report gives (the trace's engine is
// "native:<Protocol>").
func (k Kind) Protocol() string { return string(k) + ".chat" }

// usdPerCNY converts Moonshot's and Zhipu's yuan list prices for accounting: the same
// fixed, documented rate as the engines of those providers (engines' glmUSDPerCNY,
// ≈ the 2025–2026 average; see internal/fixtures/SOURCES.md), so costs are
// reproducible.
const usdPerCNY = 0.14

// Prices per native search call, in USD. Kimi: ¥0.03 per $web_search call (Moonshot's
// docs, WIRE_FORMATS.md §5). GLM: the search_pro engine this caller asks for, ¥0.03
// per call (Zhipu's docs, WIRE_FORMATS.md §4a).
const (
	kimiSearchUSD = 0.03 * usdPerCNY
	glmSearchUSD  = 0.03 * usdPerCNY
)

// Caller is an llm.Caller that runs the provider's own web search.
type Caller struct {
	kind   Kind
	client llm.Caller
	// always reports the cited pages also of an answer that ran no search.
	always bool
}

var _ llm.Starter = (*Caller)(nil)

// New returns a caller of kind's native search over client, an llm.Client of the
// provider. A GLM client must be built on an http.Client from HTTPClient, through
// which the caller reads the response's top-level web_search array.
func New(kind Kind, client llm.Caller) *Caller {
	return &Caller{kind: kind, client: client}
}

// NewForEngine is New for a grounded search engine (pkg/engines), which reads an
// answer's sources from its report: the report comes also when the model cited pages
// without running a search (with Requests 0).
func NewForEngine(kind Kind, client llm.Caller) *Caller {
	return &Caller{kind: kind, client: client, always: true}
}

// Complete calls the model. Without the fleet's web_search tool in body the call is
// the client's, unchanged (but for llm.NativeKey reports of earlier answers, which
// never go to a provider).
func (c *Caller) Complete(ctx context.Context, body []byte, onDelta func(llm.Delta)) (*llm.Completion, error) {
	// With the client's Complete every step runs on this goroutine: done has run when
	// run returns.
	var comp *llm.Completion
	var err error
	c.run(ctx, body, onDelta, c.complete, func(cp *llm.Completion, e error) { comp, err = cp, e })
	return comp, err
}

// Start is Complete with the client's own calls started (llm.StartCall): with an
// llm.Client on an llm.AsyncTransport no goroutine waits on the provider, and Kimi's
// next round starts from the callback of the one before.
func (c *Caller) Start(ctx context.Context, body []byte, onDelta func(llm.Delta), done func(*llm.Completion, error)) {
	c.run(ctx, body, onDelta, c.start, done)
}

// callFunc makes one call of the client and calls done exactly once with its outcome.
type callFunc func(ctx context.Context, body []byte, onDelta func(llm.Delta), done func(*llm.Completion, error))

// complete is the client's Complete as a callFunc.
func (c *Caller) complete(ctx context.Context, body []byte, onDelta func(llm.Delta), done func(*llm.Completion, error)) {
	done(c.client.Complete(ctx, body, onDelta))
}

// start is the client's Start as a callFunc (its Complete when it has none).
func (c *Caller) start(ctx context.Context, body []byte, onDelta func(llm.Delta), done func(*llm.Completion, error)) {
	llm.StartCall(ctx, c.client, body, onDelta, done)
}

// run makes the call of Complete and Start, calling the client with call.
func (c *Caller) run(ctx context.Context, body []byte, onDelta func(llm.Delta), call callFunc, done func(*llm.Completion, error)) {
	req, err := decodeRequest(body)
	if err != nil {
		done(nil, &llm.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: "the chain's request is not a JSON object"})
		return
	}
	offered := req.takeSearchTool()
	if !offered {
		out, err := req.encode()
		if err != nil {
			done(nil, err)
			return
		}
		call(ctx, out, onDelta, done)
		return
	}
	switch c.kind {
	case GLM:
		c.glm(ctx, req, onDelta, call, done)
	default:
		c.kimi(ctx, req, onDelta, call, done)
	}
}

// request is a chain's Chat request, split at the top level.
type request struct {
	top      map[string]json.RawMessage
	messages []json.RawMessage
	tools    []json.RawMessage
}

func decodeRequest(body []byte) (*request, error) {
	r := &request{}
	if err := json.Unmarshal(body, &r.top); err != nil || r.top == nil {
		return nil, err
	}
	if raw, ok := r.top["messages"]; ok {
		if err := json.Unmarshal(raw, &r.messages); err != nil {
			return nil, err
		}
	}
	if raw, ok := r.top["tools"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &r.tools); err != nil {
			return nil, err
		}
	}
	r.stripReports()
	return r, nil
}

// stripReports removes llm.NativeKey reports from the assistant messages of an earlier
// hop: they are the fleet's, never a provider's.
func (r *request) stripReports() {
	for i, m := range r.messages {
		if !bytes.Contains(m, []byte(llm.NativeKey)) {
			continue
		}
		var fields map[string]json.RawMessage
		if json.Unmarshal(m, &fields) != nil || fields[llm.NativeKey] == nil {
			continue
		}
		delete(fields, llm.NativeKey)
		r.messages[i], _ = json.Marshal(fields)
	}
}

// takeSearchTool removes the fleet's web_search function from the tools (and a
// tool_choice that names it) and reports whether it was there.
func (r *request) takeSearchTool() bool {
	kept := r.tools[:0:0]
	found := false
	for _, raw := range r.tools {
		var t struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(raw, &t) == nil && t.Type == "function" && llm.IsWebSearchCall(t.Function.Name) {
			found = true
			continue
		}
		kept = append(kept, raw)
	}
	r.tools = kept
	if tc, ok := r.top["tool_choice"]; ok && found {
		var choice struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(tc, &choice) == nil && llm.IsWebSearchCall(choice.Function.Name) {
			delete(r.top, "tool_choice")
		}
	}
	return found
}

// encode is the request body with its messages and tools.
func (r *request) encode() ([]byte, error) {
	msgs, err := json.Marshal(r.messages)
	if err != nil {
		return nil, &llm.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: "building request", Err: err}
	}
	r.top["messages"] = msgs
	if len(r.tools) > 0 {
		r.top["tools"], _ = json.Marshal(r.tools)
	} else {
		delete(r.top, "tools")
		delete(r.top, "tool_choice")
		delete(r.top, "parallel_tool_calls")
	}
	return json.Marshal(r.top)
}

// withReport returns msg (a provider's assistant message, as raw JSON fields) with its
// content, tool calls and native-search report set.
func withReport(fields map[string]json.RawMessage, content string, calls []json.RawMessage, n *llm.NativeSearch) json.RawMessage {
	fields["role"] = json.RawMessage(`"assistant"`)
	fields["content"], _ = json.Marshal(content)
	if len(calls) > 0 {
		fields["tool_calls"], _ = json.Marshal(calls)
		if content == "" {
			fields["content"] = json.RawMessage("null")
		}
	} else {
		delete(fields, "tool_calls")
	}
	if n != nil {
		fields[llm.NativeKey], _ = json.Marshal(n)
	}
	out, _ := json.Marshal(fields)
	return out
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}
