package chat

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// worstCaseView is a second hop's view and request body: the client's request with
// its max_tokens, then a search result the size the model reads (about 6 KB).
func worstCaseView(t testing.TB, request string) (*view, []byte) {
	t.Helper()
	req, err := llm.DecodeChatRequest([]byte(request))
	if err != nil {
		t.Fatal(err)
	}
	result, _ := json.Marshal(map[string]string{"role": "tool", "tool_call_id": "c1", "content": strings.Repeat(benchResult(true), 2)})
	body, err := req.Body("up", append(append([]json.RawMessage(nil), req.Messages...), result), nil)
	if err != nil {
		t.Fatal(err)
	}
	return &view{job: &state.Job{Model: "m"}, req: req}, body
}

// A turn's worst case reads the answer's bound from whichever field the request sets
// it in; the model's own bound, then the fleet's default, when it sets none; a bound
// of the wrong type counts as none.
func TestWorstCaseOutputBound(t *testing.T) {
	t.Parallel()
	w := &Worker{Models: map[string]Model{"m": {Pricing: state.Pricing{OutputPerMTokUSD: 1e6}}}} // $1 an output token
	for _, c := range []struct {
		extra string
		want  float64
		model int
	}{
		{`,"max_tokens":100`, 100, 0},
		{`,"max_completion_tokens":200`, 200, 0},
		{`,"max_output_tokens":300`, 300, 0},
		{`,"generationConfig":{"maxOutputTokens":400,"temperature":0.5}`, 400, 0},
		{`,"max_tokens":0,"max_completion_tokens":250`, 250, 0},
		{`,"temperature":0.2`, 700, 700},
		{``, defaultMaxOutputTokens, 0},
		{`,"max_tokens":"100"`, defaultMaxOutputTokens, 0},
		{`,"max_tokens":100,"generationConfig":[]`, defaultMaxOutputTokens, 0},
	} {
		m := w.Models["m"]
		m.Pricing.MaxOutputTokens = c.model
		w.Models["m"] = m
		v, body := worstCaseView(t, `{"model":"m","messages":[{"role":"user","content":"weather in Paris?"}]`+c.extra+`}`)
		if usd, _ := w.worstCase(v, len(body), false); usd != c.want {
			t.Errorf("%s: worst case $%v, want $%v", c.extra, usd, c.want)
		}
	}
}

// BenchmarkWorstCase is the cost of pricing a hop's worst case before its model call.
func BenchmarkWorstCase(b *testing.B) {
	w := &Worker{Models: map[string]Model{"m": {Pricing: state.Pricing{InputPerMTokUSD: 3, OutputPerMTokUSD: 15}}}}
	v, body := worstCaseView(b, `{"model":"m","messages":[{"role":"user","content":"weather in Paris?"}],"max_tokens":1024,"temperature":0.2}`)
	b.ReportAllocs()
	for range b.N {
		w.worstCase(v, len(body), false)
	}
}
