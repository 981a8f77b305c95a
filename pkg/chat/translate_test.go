package chat_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/chat"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// countingAPI counts a model protocol's translations: requests encoded, answers decoded.
type countingAPI struct {
	wire.ModelAPI
	encodes, decodes atomic.Int64
}

func (c *countingAPI) EncodeRequest(r *wire.Request, model string) ([]byte, error) {
	c.encodes.Add(1)
	return c.ModelAPI.EncodeRequest(r, model)
}

func (c *countingAPI) DecodeResponse(body []byte) (*wire.Response, error) {
	c.decodes.Add(1)
	return c.ModelAPI.DecodeResponse(body)
}

// Each model call of a search loop is translated once each way: its canonical request
// encoded in the model's protocol once, its answer decoded once and kept as a canonical
// turn (no Chat form in between: the turns the chain stores have parts, no message).
func TestEachModelCallIsTranslatedOnceEachWay(t *testing.T) {
	t.Parallel()
	api := &countingAPI{ModelAPI: openaichat.Model}
	h := newHarness(t, []func(http.ResponseWriter){calls(webSearch("c1", "weather in Paris")), text("Sunny [1].")}, func(w *chat.Worker, h *harness) {
		srv := httptest.NewServer(h.model)
		t.Cleanup(srv.Close)
		m := w.Models["m"]
		m.Client = upstream.New(api, "sim", srv.URL, "", srv.Client(), upstream.Options{})
		w.Models["m"] = m
	})
	h.submit("j1", "Search the web: weather in Paris today?")
	if err := h.job("j1", 1); err != nil {
		t.Fatal(err)
	}
	reqs := h.pub.searches()
	if len(reqs) != 1 {
		t.Fatalf("%d searches", len(reqs))
	}
	if err := h.resume(answerSearch(reqs[0], "https://a.example/1"), 1); err != nil {
		t.Fatal(err)
	}
	if j := h.ended("j1"); j == nil {
		t.Fatal("the job did not end")
	}
	if e, d := api.encodes.Load(), api.decodes.Load(); e != 2 || d != 2 {
		t.Errorf("two model calls: %d requests encoded, %d answers decoded; want 2 and 2", e, d)
	}
	st, err := h.store.Chains.LoadStep(context.Background(), "j1", nil)
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 2; k++ {
		var turn map[string]json.RawMessage
		if hp := st.Chain.Hops[k]; hp == nil || json.Unmarshal(hp.Turn, &turn) != nil || turn["parts"] == nil || turn["message"] != nil {
			t.Errorf("hop %d's turn is not canonical: %v", k, turn)
		}
	}
}
