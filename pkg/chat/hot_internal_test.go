package chat

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// oneCallView is a completing job's view: hop 0 made one web_search call.
func oneCallView(t testing.TB) *view {
	t.Helper()
	cb, err := json.Marshal([]call{{ID: "call_1", Engine: "brave", Choice: "default", Query: engines.Query{Query: "go 1.26 release notes", Count: 5}, Salt: "s4lt"}})
	if err != nil {
		t.Fatal(err)
	}
	chain := &state.Chain{Hops: map[int]*state.Hop{0: {Calls: cb, Expected: 1}}}
	return &view{job: &state.Job{ID: "j1", Model: "m"}, chain: chain, hopCalls: map[int][]call{}}
}

// A hop's calls read from the view are those stored, whether decoded now or before.
func TestViewCallsMemoized(t *testing.T) {
	t.Parallel()
	v := oneCallView(t)
	var want []call
	if err := json.Unmarshal(v.chain.Hops[0].Calls, &want); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if got := v.calls(0); !reflect.DeepEqual(got, want) {
			t.Fatalf("calls(0) = %+v, want %+v", got, want)
		}
	}
	if got := v.calls(1); got != nil {
		t.Fatalf("calls(1) of a hop with none = %+v", got)
	}
	if got := (&view{chain: v.chain}).calls(0); !reflect.DeepEqual(got, want) {
		t.Fatalf("calls(0) of a view without the memo = %+v", got)
	}
}

// BenchmarkViewCalls reads hop 0's calls as a completing hop does (the evidence nonce,
// the fetch count, the trace, the response).
func BenchmarkViewCalls(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		v := oneCallView(b)
		for range 4 {
			_ = v.calls(0)
		}
	}
}

// A hop's delimiter nonce is the one its salt and the job give.
func TestViewNonce(t *testing.T) {
	t.Parallel()
	v := oneCallView(t)
	v.evidenceKey = []byte("k")
	if got, want := v.nonce(0), evidenceNonce(v.evidenceKey, v.job.ID, "s4lt"); got != want {
		t.Fatalf("nonce(0) = %q, want %q", got, want)
	}
	if got, want := v.nonce(1), evidenceNonce(v.evidenceKey, v.job.ID, ""); got != want {
		t.Fatalf("nonce(1) of a hop without calls = %q, want %q", got, want)
	}
}

// A job's usage record encodes to the bytes the map it was built as before gave.
func TestJobUsageBytes(t *testing.T) {
	t.Parallel()
	cites := wire.CitationCounts{Cited: 3, Valid: 2, Removed: 1}
	u := jobUsage{PromptTokens: 120, CompletionTokens: 40, TotalTokens: 160, ModelCalls: 2, ModelProtocol: "openai-chat <&>",
		Searches: 1, SearchCostUSD: 0.005, ModelCostUSD: 0.0012345, CostUSD: 0.0062345, Citations: cites}
	got, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(map[string]any{"prompt_tokens": 120, "completion_tokens": 40, "total_tokens": 160,
		"model_calls": 2, "model_protocol": "openai-chat <&>", "searches": 1, "search_cost_usd": 0.005,
		"model_cost_usd": 0.0012345, "cost_usd": 0.0062345, "citations": cites})
	if string(got) != string(want) {
		t.Fatalf("usage %s, want %s", got, want)
	}
}

// BenchmarkJobUsage is a completed job's usage record, encoded once per job.
func BenchmarkJobUsage(b *testing.B) {
	u := jobUsage{PromptTokens: 120, CompletionTokens: 40, TotalTokens: 160, ModelCalls: 2, ModelProtocol: "openai-chat",
		Searches: 1, SearchCostUSD: 0.005, ModelCostUSD: 0.0012345, CostUSD: 0.0062345}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(u); err != nil {
			b.Fatal(err)
		}
	}
}
