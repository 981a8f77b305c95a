package simulator_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// sentBodies is a transport that keeps the path and body of every request.
type sentBodies struct {
	mu   sync.Mutex
	sent []string
}

func (s *sentBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.sent = append(s.sent, r.Method+" "+r.URL.Path+" "+string(b))
	s.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(b))
	return http.DefaultTransport.RoundTrip(r)
}

// A Perplexity main model speaks the Agent API: POST /v1/agent with a Responses-shaped
// body that has none of the fields the Agent API lacks (the simulator refuses them),
// asked for web_search it answers a function call, and given the result it answers
// with text. Nothing is sent to /chat/completions.
func TestPerplexityMainModelAgentAPI(t *testing.T) {
	t.Parallel()
	rec := &sentBodies{}
	c := upstream.New(responses.PerplexityAgent, "perplexity", startSim(t), "sim-key", &http.Client{Transport: rec}, upstream.Options{Reasons: true})
	strict := true
	tools := []wire.Tool{{Name: "web_search", Description: "Search the web", Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`), Strict: &strict}}
	user := wire.Message{Role: wire.RoleUser, Parts: []wire.Part{{Kind: wire.PartText, Text: "Search the web for the latest news about NATS JetStream"}}}
	req := &wire.Request{Model: "openai/gpt-5.2", System: "Be brief.", Messages: []wire.Message{user}, Tools: tools, Temperature: new(float64),
		ToolChoice: &wire.ToolChoice{Mode: "auto"}, ResponseFormat: json.RawMessage(`{"type":"text"}`)}
	call, err := c.Prepare(req, true)
	if err != nil {
		t.Fatal(err)
	}
	turn, err := c.Complete(timeout(t), call, nil)
	if err != nil {
		t.Fatalf("first hop: %v\nsent: %v", err, rec.sent)
	}
	var tc *wire.ToolCall
	for _, p := range turn.Parts {
		if p.Kind == wire.PartToolCall {
			tc = p.Call
		}
	}
	if tc == nil || tc.Name != "web_search" {
		t.Fatalf("first hop: parts %+v, want a web_search call", turn.Parts)
	}
	req.Messages = append(req.Messages, wire.Message{Role: wire.RoleAssistant, Parts: turn.Parts},
		wire.Message{Role: wire.RoleTool, Parts: []wire.Part{{Kind: wire.PartToolResult, Result: &wire.ToolResult{CallID: tc.ID, Parts: []wire.Part{{Kind: wire.PartText, Text: "[1] NATS 2.12 is out (https://nats.io/blog/2-12)"}}}}}})
	if call, err = c.Prepare(req, false); err != nil {
		t.Fatal(err)
	}
	final, err := c.Complete(timeout(t), call, nil)
	if err != nil {
		t.Fatalf("second hop: %v\nsent: %v", err, rec.sent)
	}
	text := ""
	for _, p := range final.Parts {
		text += p.Text
	}
	if !strings.Contains(text, "[1]") || final.Usage.CompletionTokens == 0 {
		t.Errorf("final answer %q, usage %+v", text, final.Usage)
	}
	if len(rec.sent) != 2 {
		t.Fatalf("%d requests, want 2", len(rec.sent))
	}
	for _, s := range rec.sent {
		if !strings.HasPrefix(s, "POST /v1/agent {") {
			t.Errorf("sent %.60q, want POST /v1/agent", s)
		}
		for _, k := range []string{`"store"`, `"include"`, `"tool_choice"`, `"temperature"`, `"stream"`} {
			if strings.Contains(s, k) {
				t.Errorf("sent %s, which the Agent API does not take", k)
			}
		}
	}
	if !strings.Contains(rec.sent[1], `"type":"function_call_output"`) || !strings.Contains(rec.sent[1], `"type":"message"`) {
		t.Errorf("second request %s: want typed message and function_call_output items", rec.sent[1])
	}
}
