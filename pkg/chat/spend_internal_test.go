package chat

import (
	"testing"

	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/spend"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// worstCaseView is a second hop's view and request size: the client's request (in
// its protocol) with its answer bound, then a search result the size the model reads
// (about 6 KB).
func worstCaseView(t testing.TB, codec wire.ClientCodec, request string) (*view, int) {
	t.Helper()
	req, err := codec.DecodeRequest([]byte(request))
	if err != nil {
		t.Fatal(err)
	}
	return &view{job: &state.Job{Model: "m"}, req: req}, len(request) + 2*len(benchResult(true))
}

// A turn's worst case reads the answer's bound from whichever field the client's
// protocol names it in; the model's own bound, then the fleet's default, when it sets
// none.
func TestWorstCaseOutputBound(t *testing.T) {
	t.Parallel()
	w := &Worker{Models: map[string]Model{"m": {Pricing: spend.Pricing{OutputPerMTokUSD: 1e6}}}} // $1 an output token
	for _, c := range []struct {
		codec   wire.ClientCodec
		request string
		want    float64
		model   int
	}{
		{openaichat.Client, `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":100}`, 100, 0},
		{openaichat.Client, `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":200}`, 200, 0},
		{responses.Client, `{"model":"m","input":"hi","max_output_tokens":300}`, 300, 0},
		{anthropic.Client, `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":400}`, 400, 0},
		{openaichat.Client, `{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0.2}`, 700, 700},
		{openaichat.Client, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, spend.DefaultMaxOutputTokens, 0},
	} {
		m := w.Models["m"]
		m.Pricing.MaxOutputTokens = c.model
		w.Models["m"] = m
		v, size := worstCaseView(t, c.codec, c.request)
		if usd, _ := w.worstCase(v, size, false); usd != c.want {
			t.Errorf("%s: worst case $%v, want $%v", c.request, usd, c.want)
		}
	}
}

// BenchmarkWorstCase is the cost of pricing a hop's worst case before its model call.
func BenchmarkWorstCase(b *testing.B) {
	w := &Worker{Models: map[string]Model{"m": {Pricing: spend.Pricing{InputPerMTokUSD: 3, OutputPerMTokUSD: 15}}}}
	v, size := worstCaseView(b, openaichat.Client, `{"model":"m","messages":[{"role":"user","content":"weather in Paris?"}],"max_tokens":1024,"temperature":0.2}`)
	b.ReportAllocs()
	for range b.N {
		w.worstCase(v, size, false)
	}
}
