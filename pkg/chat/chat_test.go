package chat

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/engines"
)

func srcs(urls ...string) []engines.Source {
	var out []engines.Source
	for _, u := range urls {
		out = append(out, engines.Source{Web: engines.Web{Title: "t " + u, URI: u}})
	}
	return out
}

// Annotations carry code point offsets of the markers, as OpenAI's do, also after
// non-ASCII text; markers that number no source get none.
func TestAnnotateOffsets(t *testing.T) {
	t.Parallel()
	text := "气温 67°F [1]; wind [2][9] — ok [x] [10]"
	got := annotate(text, srcs("https://a.example/", "https://b.example/"))
	if len(got) != 2 {
		t.Fatalf("annotations %+v", got)
	}
	r := []rune(text)
	for i, want := range []string{"[1]", "[2]"} {
		a := got[i].URLCitation
		if s := string(r[a.StartIndex:a.EndIndex]); s != want {
			t.Errorf("annotation %d spans %q, want %q", i, s, want)
		}
	}
	if got[1].URLCitation.URL != "https://b.example/" {
		t.Errorf("url %q", got[1].URLCitation.URL)
	}
}

// Two searches in one chain are numbered in one sequence: the second result's [1]
// becomes the next free number, and a source both returned keeps its first number.
func TestRenderNumbersAcrossTheChain(t *testing.T) {
	t.Parallel()
	var all sources
	first := &engines.Result{Query: "q1", Summary: "A [1]. B [2].", Citation: engines.Citation{Sources: srcs("https://a/", "https://b/")}}
	second := &engines.Result{Query: "q2", Summary: "C [1]. Again B [2].", Citation: engines.Citation{Sources: srcs("https://c/", "https://b/")}}
	render(first, &all)
	out := render(second, &all)
	if !strings.Contains(out, "C [3]. Again B [2].") {
		t.Fatalf("second result renumbered as:\n%s", out)
	}
	if !strings.Contains(out, "[3] t https://c/ (https://c/)") || !strings.Contains(out, "[2] t https://b/ (https://b/)") {
		t.Fatalf("sources list:\n%s", out)
	}
	if len(all.list) != 3 {
		t.Errorf("chain has %d sources, want 3", len(all.list))
	}
}

// The conversation hash ignores JSON formatting and key order (clients re-serialise),
// but not content.
func TestConversationHash(t *testing.T) {
	t.Parallel()
	a := []json.RawMessage{json.RawMessage(`{"role":"user","content":"hi"}`), json.RawMessage(`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`)}
	b := []json.RawMessage{json.RawMessage(`{ "content" : "hi", "role" : "user" }`), json.RawMessage(`{"tool_calls":[{"function":{"arguments":"{}","name":"f"},"type":"function","id":"c1"}],"role":"assistant"}`)}
	c := []json.RawMessage{json.RawMessage(`{"role":"user","content":"hello"}`), a[1]}
	ha, _ := conversationHash("t1", a)
	hb, _ := conversationHash("t1", b)
	hc, _ := conversationHash("t1", c)
	if ha != hb || ha == hc {
		t.Fatalf("hashes %s %s %s", ha, hb, hc)
	}
	if other, _ := conversationHash("t2", a); other == ha {
		t.Fatal("another tenant's identical conversation has the same hash: it would share the sticky flag")
	}
	withResult := append(append([]json.RawMessage(nil), b...), json.RawMessage(`{"role":"tool","tool_call_id":"c1","content":"r"}`), json.RawMessage(`{"role":"user","content":"next"}`))
	if hn, _ := continuedConversation("t1", withResult); hn != ha {
		t.Fatal("the continued conversation does not hash to the conversation that ended in tool calls")
	}
}
