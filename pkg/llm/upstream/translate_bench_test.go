package upstream_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/llm/upstream"

	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
)

// hopBody is a third hop's Chat request as the chain builds it: a question, then two
// hops of a thinking model's web_search call (with its reasoning_content) and the
// call's results.
func hopBody() []byte {
	msgs := []any{map[string]any{"role": "system", "content": "You are helpful."}, map[string]any{"role": "user", "content": question}}
	for h := range 2 {
		id := fmt.Sprintf("call_%d", h)
		msgs = append(msgs, map[string]any{"role": "assistant", "content": nil, "reasoning_content": strings.Repeat("thinking ", 100),
			"tool_calls": []any{map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "web_search", "arguments": `{"query":"nats jetstream"}`}}}})
		msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": id, "content": results(8)})
	}
	b, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs, "tools": []json.RawMessage{json.RawMessage(webSearchTool)}, "temperature": 0.2})
	return b
}

// BenchmarkHopPrepare is what a Chat model's third hop costs the caller before it is
// sent: the chain's canonical request encoded once for the model (Prepare). Before
// the chain spoke canonical, it built the hop as Chat JSON, and the caller decoded that
// and encoded it again: ~0.4–0.5 ms and 386 allocations for this hop on the reference
// machine (BENCHMARKS.md), now only the encoding.
func BenchmarkHopPrepare(b *testing.B) {
	body := hopBody()
	req, err := openaichat.Client.DecodeRequest(body)
	if err != nil {
		b.Fatal(err)
	}
	c := upstream.New(openaichat.Model, "m", "http://127.0.0.1:1/v1", "k", nil, upstream.Options{})
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Prepare(req, false); err != nil {
			b.Fatal(err)
		}
	}
}
