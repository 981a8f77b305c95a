package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
)

// The demo models with OpenAI's and Gemini's own search (sim-responses-native,
// sim-gemini-native) answer from the provider's search alone: one model call, the
// provider's citations as the fleet's [n] markers whose annotations name the
// answer's sources, and a job record that counts the provider's searches like the
// fleet's (a trace entry per search, engine native:<protocol>, the searches' price in
// the usage).
func TestNativeSearchResponsesAndGeminiInJobRecord(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	for _, c := range []struct {
		model, protocol, engine string
		searches                int
		cost                    float64
		sources                 int
		firstSource, firstQuery string
		firstFound              int
	}{
		// The simulator's search is about the question: its pages are made from it.
		{demo.ModelResponsesNative, "openai-responses", "native:openai.responses", 1, 0.01, 3,
			"https://news.example.com/search-the-web-for-the-latest-news-about-nats-jetstream", "Search the web for the latest news about NATS JetStream", 5},
		{demo.ModelGeminiNative, "gemini", "native:gemini", 1, 0.035, 3,
			"https://news.example.com/search-the-web-for-the-latest-news-about-nats-jetstream", "Search the web for the latest news about NATS JetStream", 5},
	} {
		t.Run(c.model, func(t *testing.T) {
			status, body, _ := f.Do(t, "POST", "/v1/chat/completions", map[string]any{
				"model": c.model, "messages": []any{map[string]any{"role": "user", "content": "Search the web for the latest news about NATS JetStream"}},
			})
			var resp map[string]any
			if err := json.Unmarshal(body, &resp); err != nil || status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			content := fleettest.Content(resp)
			msg := resp["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
			if !strings.HasPrefix(content, "(simulated answer) ") || !strings.Contains(content, "[1]") || msg["searchfleet_native"] != nil ||
				!strings.Contains(content, "latest news about NATS JetStream, simulated result 1 of 5.") {
				t.Fatalf("answer %q, message %v", content, msg)
			}
			sources := resp["searchfleet"].(map[string]any)["sources"].([]any)
			if len(sources) != c.sources || c.firstSource != "" && sources[0].(map[string]any)["url"] != c.firstSource {
				t.Errorf("sources %v", sources)
			}
			// Every marker's annotation names the source it numbers.
			anns, _ := msg["annotations"].([]any)
			if len(anns) == 0 {
				t.Fatalf("no annotations: %v", msg)
			}
			runes := []rune(content)
			for _, a := range anns {
				uc := a.(map[string]any)["url_citation"].(map[string]any)
				start, end := int(uc["start_index"].(float64)), int(uc["end_index"].(float64))
				var n int
				if end > len(runes) || start < 0 || start >= end {
					t.Fatalf("annotation %v outside the text", uc)
				}
				if _, err := fmt.Sscanf(string(runes[start:end]), "[%d]", &n); err != nil || n < 1 || n > len(sources) || sources[n-1].(map[string]any)["url"] != uc["url"] {
					t.Errorf("annotation %v spans %q", uc, string(runes[start:end]))
				}
			}
			j, err := f.Store.Jobs.GetJob(context.Background(), jobID(t, resp))
			if err != nil {
				t.Fatal(err)
			}
			var usage map[string]any
			json.Unmarshal(j.Usage, &usage)
			if usage["searches"] != float64(c.searches) || math.Abs(usage["search_cost_usd"].(float64)-c.cost) > 1e-9 || usage["model_calls"] != 1.0 || usage["model_protocol"] != c.protocol {
				t.Errorf("usage %s", j.Usage)
			}
			var trace []map[string]any
			json.Unmarshal(j.Trace, &trace)
			if len(trace) != c.searches || trace[0]["engine"] != c.engine || trace[0]["query"] != c.firstQuery || len(trace[0]["sources"].([]any)) != c.firstFound {
				t.Errorf("trace %s", j.Trace)
			}
		})
	}
	if n := f.Sim.Stats().Requests["model_native_search"]; n != 2 {
		t.Errorf("%d native-search model calls, want 2", n)
	}
}

// A streamed answer of a model that searches itself arrives whole and equal to the
// stored answer: its [n] markers are placed where the provider's citations point,
// which is known only once the answer is, so its text is not relayed as written (it
// was, and the client's stream ended with the marked tail repeated).
func TestNativeSearchStreamsTheStoredAnswer(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	for _, model := range []string{demo.ModelClaudeNative, demo.ModelResponsesNative, demo.ModelGeminiNative} {
		t.Run(model, func(t *testing.T) {
			t.Parallel()
			c := openaiClient(f)
			st := c.Chat.Completions.NewStreaming(ctx(t), openai.ChatCompletionNewParams{
				Model:    model,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Search the web for the latest news about NATS JetStream")},
			})
			var acc openai.ChatCompletionAccumulator
			var job string
			for st.Next() {
				ch := st.Current()
				acc.AddChunk(ch)
				job = strings.TrimPrefix(ch.ID, "chatcmpl-")
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
			status, stored, _ := storedJob(t, f, job)
			var want struct {
				Choices []struct {
					Message struct {
						Content string `json:"content"`
					} `json:"message"`
				} `json:"choices"`
			}
			json.Unmarshal(stored, &want)
			if status != "completed" || len(want.Choices) == 0 || len(acc.Choices) == 0 {
				t.Fatalf("job %s: %s", status, stored)
			}
			if got := acc.Choices[0].Message.Content; got != want.Choices[0].Message.Content || !strings.Contains(got, "[1]") {
				t.Fatalf("streamed %q\nstored   %q", got, want.Choices[0].Message.Content)
			}
		})
	}
}
