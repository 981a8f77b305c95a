package chat_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/chat"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// The trace keeps each source's title and, where the engine dated the page, its
// date: the source's own title, else its hit's; the date from the hit with its URL.
func TestTraceKeepsTitlesAndDates(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []func(http.ResponseWriter){calls(webSearch("c1", "weather in Paris")), text("Sunny [1] [2].")})
	h.submit("j1", "Search the web: weather in Paris today?")
	if err := h.job("j1", 1); err != nil {
		t.Fatal(err)
	}
	reqs := h.pub.searches()
	if len(reqs) != 1 {
		t.Fatalf("%d searches", len(reqs))
	}
	done := answerSearch(reqs[0], "https://a.example/1")
	done.Result.Citation.Sources = append(done.Result.Citation.Sources, engines.Source{Web: engines.Web{URI: "https://b.example/2"}})
	done.Result.Hits = []engines.Hit{
		{Title: "hit a", URL: "https://a.example/1", Published: time.Date(2026, 3, 3, 10, 0, 0, 0, time.UTC)},
		{Title: "Page B", URL: "https://b.example/2"},
	}
	if err := h.resume(done, 1); err != nil {
		t.Fatal(err)
	}
	j := h.ended("j1")
	var trace []wire.TraceEntry
	if err := json.Unmarshal(j.Trace, &trace); err != nil || len(trace) != 1 {
		t.Fatalf("trace %s: %v", j.Trace, err)
	}
	want := []wire.TraceSource{
		{URL: "https://a.example/1", Title: "t https://a.example/1", PageAge: "March 3, 2026"},
		{URL: "https://b.example/2", Title: "Page B"},
	}
	if got := trace[0].Sources; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("trace sources %+v, want %+v", got, want)
	}
}

// A job's answer lists the request's search settings the fleet cannot honour in
// searchfleet.warnings, whatever protocol the request arrived in (the ingress renders
// them once, in that protocol's form).
func TestChatWarningsNameUnhonouredSettings(t *testing.T) {
	t.Parallel()
	opts := `,"web_search_options":{"search_context_size":"low","user_location":{"type":"approximate","approximate":{"city":"Paris","country":"FR"}}}`
	// A Responses request's settings as its ingress stored them.
	req, err := responses.Client.DecodeRequest([]byte(`{"model":"m","input":"hello there","tools":[{"type":"web_search"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Search.Unhonoured = []string{"user_location.city is not honoured"}
	responses, err := wire.EncodeStored(wire.OpenAIResponses, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, extra string
		stored      json.RawMessage
		want        bool
	}{
		{"chat", opts, nil, true},
		{"chat without settings", "", nil, false},
		{"responses", "", responses, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, []func(http.ResponseWriter){text("Hello.")})
			if tc.stored == nil {
				h.submit("j1", "hello there", tc.extra)
			} else {
				h.submitRaw(&state.Job{ID: "j1", Kind: "chat", Model: "m", Request: tc.stored})
			}
			if err := h.job("j1", 1); err != nil {
				t.Fatal(err)
			}
			var resp struct {
				Searchfleet struct {
					Warnings []string `json:"warnings"`
				} `json:"searchfleet"`
			}
			j := h.ended("j1")
			if err := json.Unmarshal(j.Response, &resp); err != nil {
				t.Fatal(err)
			}
			got := strings.Join(resp.Searchfleet.Warnings, "; ")
			if tc.want != strings.Contains(got, "city") || !tc.want && got != "" {
				t.Fatalf("warnings %q (want a note on the city: %v): %s", got, tc.want, j.Response)
			}
		})
	}
}

// A provider that bills one search for an answer that ran several queries (Gemini
// grounding: one grounded prompt) shares that price among the answer's trace entries:
// they add up to the usage, not to a price per query.
func TestNativeTraceAddsUpToItsBill(t *testing.T) {
	t.Parallel()
	answer := &wire.Turn{Parts: []wire.Part{{Kind: wire.PartText, Text: "Warm [1]."}}, Stop: wire.StopEndTurn,
		Usage: llm.Usage{PromptTokens: 10, CompletionTokens: 5}, Native: &llm.NativeSearch{
			Protocol: "gemini", Requests: 1, CostUSD: 0.035,
			Searches: []llm.NativeQuery{{ID: "q1", Query: "weather", URLs: []string{"https://a.example"}}, {ID: "q2", Query: "weather today"}, {ID: "q3", Query: "forecast"}},
			Sources:  []llm.NativeSource{{URL: "https://a.example", Title: "A"}},
		}}
	// The model's caller reports its provider's searches (as upstream.Caller does for
	// a Gemini model with native search).
	h := newHarness(t, nil, func(w *chat.Worker, _ *harness) {
		w.Models = map[string]chat.Model{"m": {Provider: "sim", Upstream: "up", NativeSearch: true, Client: answering{answer}}}
	})
	h.submit("j1", "What's the weather? Search the web")
	if err := h.job("j1", 1); err != nil {
		t.Fatal(err)
	}
	j := h.ended("j1")
	var trace []struct {
		Engine string        `json:"engine"`
		Usage  engines.Usage `json:"usage"`
	}
	json.Unmarshal(j.Trace, &trace)
	var usage struct {
		Searches int     `json:"searches"`
		Cost     float64 `json:"search_cost_usd"`
	}
	json.Unmarshal(j.Usage, &usage)
	searches, cost := 0, 0.0
	for _, e := range trace {
		searches += e.Usage.Searches
		cost += e.Usage.CostUSD
	}
	if len(trace) != 3 || trace[0].Engine != "native:gemini" || searches != 1 || math.Abs(cost-0.035) > 1e-9 || usage.Searches != 1 || math.Abs(usage.Cost-0.035) > 1e-9 {
		t.Fatalf("trace %s, usage %s: the entries should add up to 1 search and $0.035", j.Trace, j.Usage)
	}
}

// answering is a model caller that answers every call with one turn.
type answering struct{ t *wire.Turn }

func (answering) Prepare(*wire.Request, bool) (*upstream.Call, error) { return &upstream.Call{}, nil }

func (a answering) Complete(context.Context, *upstream.Call, func(llm.Delta)) (*wire.Turn, error) {
	return a.t, nil
}
