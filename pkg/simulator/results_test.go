package simulator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/engines/enginetest"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream/upstreamtest"

	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/gemini"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// The two questions every shape is asked, and the words of each that its results must
// repeat.
const (
	cupQuestion  = "who won the 2022 world cup"
	tideQuestion = "tide tables of Brest"
)

// exampleHost reports whether a URL is on one of the simulator's example domains.
func exampleHost(u string) bool {
	p, err := url.Parse(u)
	if err != nil || p.Scheme != "https" {
		return false
	}
	h := p.Hostname()
	return strings.HasSuffix(h, ".example.com") || strings.HasSuffix(h, ".example.org") || strings.HasSuffix(h, ".example.net")
}

// Every engine kind the simulator serves, through its real engine: the results are
// about the query (its words in the titles, snippets or summary; URLs on example
// domains with a path made from it), two queries give different pages, the same query
// gives identical results, and the count and domain filters the engine sends are
// honoured.
func TestSearchResultsFollowTheQuery(t *testing.T) {
	t.Parallel()
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	reg, err := engines.FromConfig(sim.EngineConfigs(srv.URL), srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if len(reg.IDs()) < 13 {
		t.Fatalf("the simulator serves %d engine kinds: %v", len(reg.IDs()), reg.IDs())
	}
	for _, id := range reg.IDs() {
		eng, _ := reg.Get(id)
		t.Run(id, func(t *testing.T) {
			t.Parallel()
			search := func(q engines.Query) *engines.Result {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				res, err := eng.Search(ctx, q)
				if err != nil {
					t.Fatalf("Search(%q): %v", q.Query, err)
				}
				enginetest.CheckInvariants(t, res)
				return res
			}
			cup := search(engines.Query{Query: cupQuestion})
			tide := search(engines.Query{Query: tideQuestion})
			again := search(engines.Query{Query: cupQuestion})
			resultAbout(t, cup, cupQuestion, "who-won-the-2022-world-cup")
			resultAbout(t, tide, tideQuestion, "tide-tables-of-brest")
			if reflect.DeepEqual(urls(cup), urls(tide)) {
				t.Errorf("two queries found the same pages: %v", urls(cup))
			}
			if !reflect.DeepEqual(cup.Hits, again.Hits) || cup.Summary != again.Summary || !reflect.DeepEqual(cup.Citation, again.Citation) {
				t.Errorf("the same query gave different results:\n%+v\n%+v", cup, again)
			}

			caps := engines.Capabilities{}
			if c, ok := eng.(engines.Capable); ok {
				caps = c.Capabilities()
			}
			if caps.Count {
				if res := search(engines.Query{Query: cupQuestion, Count: 3}); len(res.Hits) != 3 {
					t.Errorf("count 3: %d hits", len(res.Hits))
				}
			}
			if caps.AllowedDomains {
				res := search(engines.Query{Query: cupQuestion, AllowedDomains: []string{"fifa.example"}})
				if len(res.Hits) == 0 {
					t.Errorf("allowed fifa.example: no hits")
				}
				for _, h := range res.Hits {
					if u, _ := url.Parse(h.URL); u.Hostname() != "fifa.example" {
						t.Errorf("allowed fifa.example: hit on %s", h.URL)
					}
				}
			}
			if caps.BlockedDomains {
				res := search(engines.Query{Query: cupQuestion, BlockedDomains: []string{"example.com"}})
				for _, h := range res.Hits {
					if strings.HasSuffix(h.URL[:strings.Index(h.URL[8:], "/")+8], ".example.com") {
						t.Errorf("blocked example.com: hit on %s", h.URL)
					}
				}
				if len(res.Hits) == 0 {
					t.Errorf("blocked example.com: no hits left")
				}
			}
		})
	}
}

// resultAbout checks that res is about q: hits on example domains whose URL path is
// slug, and q in the hits' text or the summary.
func resultAbout(t *testing.T, res *engines.Result, q, slug string) {
	t.Helper()
	if len(res.Hits) == 0 || len(res.Citation.Sources) == 0 {
		t.Fatalf("%q: %d hits, %d sources", q, len(res.Hits), len(res.Citation.Sources))
	}
	text := res.Summary
	for _, h := range res.Hits {
		if !exampleHost(h.URL) || !strings.Contains(h.URL, "/"+slug) {
			t.Errorf("%q: hit %s is not a generated page", q, h.URL)
		}
		text += "\n" + h.Title + "\n" + h.Snippet
	}
	if !strings.Contains(text, q) {
		t.Errorf("%q: results do not mention it: %s", q, text)
	}
}

func urls(res *engines.Result) []string {
	var out []string
	for _, h := range res.Hits {
		out = append(out, h.URL)
	}
	return out
}

// The native searches of the main-model protocols (OpenAI Responses web_search,
// Anthropic web_search, Gemini grounding, Kimi $web_search, GLM web_search), through
// the fleet's own callers, whole and streamed: the answer quotes pages generated from
// the question, its sources are those pages, two questions differ and the same one
// gives the same answer.
func TestNativeSearchFollowsTheQuestion(t *testing.T) {
	t.Parallel()
	sim := simulator.New(simulator.Options{})
	hs, base, err := sim.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close() })
	type completer interface {
		Complete(ctx context.Context, body []byte, onDelta func(llm.Delta)) (*llm.Completion, error)
	}
	callers := map[string]completer{
		"openai-responses":   upstreamtest.Chat{Caller: upstream.New(responses.Model, "native", base+"/v1", "sim-key", nil, upstream.Options{NativeSearch: true})},
		"anthropic-messages": upstreamtest.Chat{Caller: upstream.New(anthropic.Model, "native", base, "sim-key", nil, upstream.Options{NativeSearch: true})},
		"gemini":             upstreamtest.Chat{Caller: upstream.New(gemini.Model, "native", base, "sim-key", nil, upstream.Options{NativeSearch: true})},
		"kimi":               upstreamtest.Chat{Caller: upstream.New(openaichat.Kimi, "sim-kimi", base+"/v1", "sim-key", nil, upstream.Options{NativeSearch: true})},
		"glm":                upstreamtest.Chat{Caller: upstream.New(openaichat.GLM, "sim-glm", base+"/v1", "sim-key", nil, upstream.Options{NativeSearch: true})},
	}
	for name, c := range callers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ask := func(q string, stream bool) (string, *llm.NativeSearch) {
				t.Helper()
				body := fmt.Sprintf(`{"model":"sim-scripted","messages":[{"role":"user","content":%q}],"tools":[{"type":"function","function":{"name":"web_search","parameters":{"type":"object","properties":{"query":{"type":"string"}}}}}]}`, q)
				var onDelta func(llm.Delta)
				if stream {
					onDelta = func(llm.Delta) {}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				comp, err := c.Complete(ctx, []byte(body), onDelta)
				if err != nil {
					t.Fatalf("%q: %v", q, err)
				}
				var m struct {
					Content string            `json:"content"`
					Native  *llm.NativeSearch `json:"searchfleet_native"`
				}
				json.Unmarshal(comp.Message, &m)
				if m.Native == nil {
					t.Fatalf("%q: no native search in %s", q, comp.Message)
				}
				return m.Content, m.Native
			}
			for _, stream := range []bool{false, true} {
				cupText, cup := ask("Search the web: "+cupQuestion+"?", stream)
				tideText, tide := ask("Search the web: "+tideQuestion+"?", stream)
				againText, again := ask("Search the web: "+cupQuestion+"?", stream)
				for _, c := range []struct {
					text, q string
					n       *llm.NativeSearch
				}{{cupText, cupQuestion, cup}, {tideText, tideQuestion, tide}} {
					// The answer quotes the first page, cites it, and the page is generated.
					if !strings.Contains(c.text, c.q+", simulated result 1 of ") || !strings.Contains(c.text, "[1]") || len(c.n.Sources) == 0 {
						t.Errorf("stream %v, %q: answer %q, %d sources", stream, c.q, c.text, len(c.n.Sources))
					}
					for _, s := range c.n.Sources {
						if !exampleHost(s.URL) {
							t.Errorf("stream %v, %q: source %s is not a generated page", stream, c.q, s.URL)
						}
					}
				}
				if cup.Sources[0].URL == tide.Sources[0].URL || cupText == tideText {
					t.Errorf("stream %v: two questions gave the same answer %q", stream, cupText)
				}
				if againText != cupText || !reflect.DeepEqual(again.Sources, cup.Sources) {
					t.Errorf("stream %v: the same question gave %q, then %q", stream, cupText, againText)
				}
			}
		})
	}
}

// The scripted model's final answer from raw search results quotes each cited
// source's snippet.
func TestScriptedAnswerQuotesSources(t *testing.T) {
	t.Parallel()
	url := startSim(t)
	results := "Web search results for \"tide tables of Brest\":\n\nSources:\n" +
		"[1] Tide tables of Brest: overview (https://wiki.example.org/tide-tables-of-brest)\n    An overview of tide tables of Brest, simulated result 1 of 2. More text.\n" +
		"[2] Brest harbour (https://news.example.com/tide-tables-of-brest)\n"
	status, out := postChat(t, url, map[string]any{"model": "m", "messages": []any{
		map[string]any{"role": "user", "content": "Search the web: tide tables of Brest?"},
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "web_search", "arguments": `{"query":"tide tables of Brest"}`}}}},
		map[string]any{"role": "tool", "tool_call_id": "c1", "content": results},
	}, "tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "web_search", "parameters": map[string]any{"type": "object"}}}}})
	content, _ := out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	want := `Tide tables of Brest: overview [1]: "An overview of tide tables of Brest, simulated result 1 of 2."; Brest harbour [2].`
	if status != 200 || !strings.Contains(content, want) {
		t.Errorf("answer %q, want it to contain %q", content, want)
	}
}
