package upstream_test

import (
	"context"
	"encoding/json"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream/upstreamtest"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// nativeMessage is a Completion's text and native-search report.
func nativeMessage(t *testing.T, c *llm.Completion) (string, *llm.NativeSearch) {
	t.Helper()
	var m struct {
		Content string            `json:"content"`
		Native  *llm.NativeSearch `json:"searchfleet_native"`
	}
	if err := json.Unmarshal(c.Message, &m); err != nil {
		t.Fatal(err)
	}
	return m.Content, m.Native
}

// With native search, the fleet's web_search tool reaches OpenAI Responses as its own
// web_search tool and Gemini as grounding with Google Search; the simulator answers
// in the recorded native answers' shapes from pages made from the question, whose citations come back as [n] markers and a
// report priced per protocol ($10 per 1,000 OpenAI calls, $35 per 1,000 grounded
// Gemini prompts), streamed too (the deltas are the text without its markers).
func TestNativeSearchResponsesAndGemini(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p                      protocol
		tools                  []string
		protocol               string
		requests, streamed     int
		cost, streamedCost     float64
		sources, streamSources int
	}{
		// Responses takes its search next to the client's function tools.
		{protocols[0], []string{weatherTool, webSearchTool}, "openai.responses", 1, 1, 0.01, 0.01, 3, 3},
		{protocols[2], []string{webSearchTool}, "gemini", 1, 1, 0.035, 0.035, 3, 3},
	} {
		t.Run(c.p.name, func(t *testing.T) {
			t.Parallel()
			sim := simulator.New(simulator.Options{})
			hs, url, err := sim.Listen("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { hs.Close() })
			cl := upstreamtest.Chat{Caller: upstream.New(c.p.api, "native", c.p.base(url), key, nil, upstream.Options{NativeSearch: true})}
			comp, err := cl.Complete(context.Background(), body([]string{user(question)}, c.tools...), nil)
			if err != nil {
				t.Fatal(err)
			}
			text, n := nativeMessage(t, comp)
			// The simulated search is about the question: the answer quotes pages that repeat it.
			if comp.FinishReason != "stop" || n == nil || !strings.HasPrefix(text, "(simulated answer) ") || !strings.Contains(text, "[1]") ||
				!strings.Contains(text, question+", simulated result 1 of 5.") {
				t.Fatalf("answer %s", comp.Message)
			}
			if n.Protocol != c.protocol || n.Requests != c.requests || math.Abs(n.CostUSD-c.cost) > 1e-9 || len(n.Sources) != c.sources || len(n.Searches) == 0 {
				t.Errorf("native report %+v", n)
			}
			if st := sim.Stats().Requests; st["model_native_search"] != 1 || st["model_offered_web_search"] != 0 {
				t.Errorf("the simulator saw %v: want the native tool, not the function tool", st)
			}
			var deltas strings.Builder
			comp, err = cl.Complete(context.Background(), body([]string{user(question)}, c.tools...), func(d llm.Delta) { deltas.WriteString(d.Text) })
			if err != nil {
				t.Fatal(err)
			}
			text, n = nativeMessage(t, comp)
			if n == nil || n.Requests != c.streamed || math.Abs(n.CostUSD-c.streamedCost) > 1e-9 || len(n.Sources) != c.streamSources || !strings.Contains(text, "[1]") {
				t.Errorf("streamed native answer %s", comp.Message)
			}
			if got := regexp.MustCompile(`\[\d+\]`).ReplaceAllString(text, ""); deltas.Len() == 0 || got != deltas.String() {
				t.Errorf("the answer without its markers %q differs from the deltas %q", got, deltas.String())
			}
		})
	}
}

// Gemini cannot ground with Google Search while it has function tools: a request
// with the client's tools keeps the fleet's web_search function instead, and the
// answer has no native report.
func TestGeminiNativeSearchYieldsToClientTools(t *testing.T) {
	t.Parallel()
	sim := simulator.New(simulator.Options{})
	hs, url, err := sim.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close() })
	p := protocols[2]
	cl := upstreamtest.Chat{Caller: upstream.New(p.api, "native", p.base(url), key, nil, upstream.Options{NativeSearch: true})}
	comp, err := cl.Complete(context.Background(), body([]string{user(question)}, weatherTool, webSearchTool), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := decode(t, comp)
	if _, n := nativeMessage(t, comp); n != nil || comp.FinishReason != "tool_calls" || len(a.ToolCalls) != 1 || a.ToolCalls[0].Function.Name != "web_search" {
		t.Errorf("answer %s", comp.Message)
	}
	if st := sim.Stats().Requests; st["model_native_search"] != 0 || st["model_offered_web_search"] != 1 {
		t.Errorf("the simulator saw %v", st)
	}
}
