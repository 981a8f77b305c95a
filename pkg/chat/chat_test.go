package chat

import (
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

func srcs(urls ...string) []engines.Source {
	var out []engines.Source
	for _, u := range urls {
		out = append(out, engines.Source{Web: engines.Web{Title: "t " + u, URI: u}})
	}
	return out
}

// Citations carry code point offsets of the markers, as OpenAI's annotations do, also
// after non-ASCII text; markers that number no source get none.
func TestCiteOffsets(t *testing.T) {
	t.Parallel()
	text := "气温 67°F [1]; wind [2][9] — ok [x] [10]"
	got := cite(text, srcs("https://a.example/", "https://b.example/"))
	if len(got) != 2 {
		t.Fatalf("citations %+v", got)
	}
	r := []rune(text)
	for i, want := range []string{"[1]", "[2]"} {
		if s := string(r[got[i].Start:got[i].End]); s != want {
			t.Errorf("citation %d spans %q, want %q", i, s, want)
		}
	}
	if got[1].URL != "https://b.example/" {
		t.Errorf("url %q", got[1].URL)
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

// The conversation hash reads what a conversation says, not its form: JSON formatting
// and key order (clients re-serialise), or the protocol that carried it (a Responses
// client sends the assistant's text and its call as two items). Content counts.
func TestConversationHash(t *testing.T) {
	t.Parallel()
	decode := func(codec wire.ClientCodec, body string) []wire.Message {
		t.Helper()
		r, err := codec.DecodeRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return r.Messages
	}
	a := decode(openaichat.Client, `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`)
	b := decode(openaichat.Client, `{ "messages" : [{ "content" : "hi", "role" : "user" },{"tool_calls":[{"function":{"arguments":"{}","name":"f"},"type":"function","id":"c1"}],"content":"Let me look.","role":"assistant"}], "model":"m"}`)
	r := decode(responses.Client, `{"model":"m","input":[{"role":"user","content":"hi"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Let me look."}]},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}]}`)
	c := decode(openaichat.Client, `{"model":"m","messages":[{"role":"user","content":"hello"},{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`)
	ha, _ := conversationHash("t1", a)
	hb, _ := conversationHash("t1", b)
	hr, _ := conversationHash("t1", r)
	hc, _ := conversationHash("t1", c)
	if ha != hb || ha != hr || ha == hc {
		t.Fatalf("hashes %s %s %s %s", ha, hb, hr, hc)
	}
	if other, _ := conversationHash("t2", a); other == ha {
		t.Fatal("another tenant's identical conversation has the same hash: it would share the sticky flag")
	}
	next := decode(openaichat.Client, `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"r"},{"role":"user","content":"next"}]}`)
	if hn, _ := continuedConversation("t1", next); hn != ha {
		t.Fatal("the continued conversation does not hash to the conversation that ended in tool calls")
	}
}
