package wire_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// A job's answer is stored in canonical form and read back as it was, reasoning
// state and citations included; each protocol renders it from there. A format this
// fleet does not write (a chat.completion itself) is refused as an answer, and a
// direct search's result, which is none, is served as stored.
func TestStoredAnswerReadsBack(t *testing.T) {
	t.Parallel()
	ans := &wire.Response{ID: "chatcmpl-j1", JobID: "j1", Model: "m", Created: time.Unix(1700000000, 0).UTC(), Status: wire.StatusCompleted,
		Content: []wire.Part{
			{Kind: wire.PartReasoning, Reasoning: &wire.Reasoning{Protocol: wire.AnthropicMessages, Text: "Look it up.", Signature: "sig-1"}},
			{Kind: wire.PartText, Text: "Sunny <b>[1]</b>.", Citations: []wire.Citation{{URL: "https://a.example/", Title: "A", Start: 9, End: 12}}},
			{Kind: wire.PartToolCall, Call: &wire.ToolCall{ID: "c1", Name: "get_time", Arguments: `{"tz":"CET"}`}},
		},
		Stop: wire.StopToolUse, Usage: wire.Usage{InputTokens: 10, OutputTokens: 5, Spend: &wire.Spend{Searches: 1, CostUSD: 0.01}},
		Sources: []wire.Source{{URL: "https://a.example/", Title: "A"}}, Notes: []string{"a note"},
		Chain: &wire.Chain{Hops: 2, Searches: 1, Citations: wire.CitationCounts{Cited: 1, Valid: 1}}}
	b, err := wire.EncodeAnswer(ans)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `\u003c`) {
		t.Errorf("stored answer escapes markup: %s", b)
	}
	got, err := wire.DecodeAnswer(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, ans) {
		t.Fatalf("read back %+v\nstored  %+v", got, ans)
	}

	// A Chat client reads the chat.completion of it, with the fleet's extension.
	chat, err := openaichat.AnswerJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		ID      string `json:"id"`
		Choices []struct {
			Message struct {
				Content     *string `json:"content"`
				ToolCalls   []any   `json:"tool_calls"`
				Annotations []struct {
					URLCitation struct {
						URL        string `json:"url"`
						StartIndex int    `json:"start_index"`
					} `json:"url_citation"`
				} `json:"annotations"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			Searchfleet wire.Spend `json:"searchfleet"`
		} `json:"usage"`
		Searchfleet struct {
			JobID     string              `json:"job_id"`
			Hops      int                 `json:"hops"`
			Searches  int                 `json:"searches"`
			Sources   []map[string]string `json:"sources"`
			Citations wire.CitationCounts `json:"citations"`
			Warnings  []string            `json:"warnings"`
		} `json:"searchfleet"`
	}
	if err := json.Unmarshal(chat, &c); err != nil {
		t.Fatal(err)
	}
	m := c.Choices[0].Message
	if c.ID != "chatcmpl-j1" || m.Content == nil || *m.Content != "Sunny <b>[1]</b>." || len(m.ToolCalls) != 1 || c.Choices[0].FinishReason != "tool_calls" ||
		len(m.Annotations) != 1 || m.Annotations[0].URLCitation.StartIndex != 9 || c.Usage.Searchfleet.CostUSD != 0.01 ||
		c.Searchfleet.JobID != "j1" || c.Searchfleet.Hops != 2 || c.Searchfleet.Searches != 1 || len(c.Searchfleet.Sources) != 1 ||
		c.Searchfleet.Citations.Valid != 1 || len(c.Searchfleet.Warnings) != 1 {
		t.Fatalf("chat answer %s", chat)
	}

	if _, err := wire.DecodeAnswer(chat); err == nil {
		t.Error("a chat.completion reads as a stored answer")
	}
	direct := []byte(`{"id":"srch_1","object":"search.result","result":{}}`)
	if got, err := openaichat.AnswerJSON(direct); err != nil || string(got) != string(direct) {
		t.Fatalf("a direct search's result served as %s (%v), stored %s", got, err, direct)
	}
	if null, err := openaichat.AnswerJSON(nil); err != nil || null != nil {
		t.Fatalf("no answer rendered as %s (%v)", null, err)
	}
}

// A Messages client gets the thinking block of the stored answer with its signature:
// the answer is rendered from the canonical form, not through Chat.
func TestStoredAnswerKeepsThinkingForMessages(t *testing.T) {
	t.Parallel()
	b, err := wire.EncodeAnswer(&wire.Response{ID: "j1", Model: "m", Status: wire.StatusCompleted, Stop: wire.StopEndTurn, Content: []wire.Part{
		{Kind: wire.PartReasoning, Reasoning: &wire.Reasoning{Protocol: wire.AnthropicMessages, Text: "Think.", Signature: "sig-1"}},
		{Kind: wire.PartText, Text: "Done."}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := wire.DecodeAnswer(b)
	if err != nil {
		t.Fatal(err)
	}
	out, err := anthropic.Client.EncodeResponse(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `{"signature":"sig-1","thinking":"Think.","type":"thinking"}`) && !strings.Contains(string(out), `"type":"thinking","thinking":"Think.","signature":"sig-1"`) {
		t.Fatalf("messages answer %s", out)
	}
}

func benchAnswer() *wire.Response {
	text := strings.Repeat("The answer cites a page [1] and another [2]. ", 20)
	return &wire.Response{ID: "chatcmpl-j1", JobID: "j1", Model: "m", Created: time.Unix(1700000000, 0).UTC(), Status: wire.StatusCompleted,
		Content: []wire.Part{{Kind: wire.PartText, Text: text, Citations: []wire.Citation{{URL: "https://a.example/", Title: "A", Start: 9, End: 12}, {URL: "https://b.example/", Title: "B", Start: 29, End: 32}}}},
		Stop:    wire.StopEndTurn, Usage: wire.Usage{InputTokens: 10, OutputTokens: 5, Spend: &wire.Spend{Searches: 1, CostUSD: 0.01}},
		Sources: []wire.Source{{URL: "https://a.example/", Title: "A"}, {URL: "https://b.example/", Title: "B"}},
		Chain:   &wire.Chain{Hops: 2, Searches: 1, Citations: wire.CitationCounts{Cited: 2, Valid: 2}}}
}

// What storing a job's answer and rendering it for a Chat client cost (the chat worker
// and the ingress each do one per job).
func BenchmarkAnswerStore(b *testing.B) {
	r := benchAnswer()
	b.ReportAllocs()
	for b.Loop() {
		wire.EncodeAnswer(r)
	}
}

func BenchmarkAnswerChat(b *testing.B) {
	s, _ := wire.EncodeAnswer(benchAnswer())
	b.ReportAllocs()
	for b.Loop() {
		openaichat.AnswerJSON(s)
	}
}

// BenchmarkAnswerDecode reads a stored answer as the ingress and the webhook sender do.
func BenchmarkAnswerDecode(b *testing.B) {
	s, _ := wire.EncodeAnswer(benchAnswer())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wire.DecodeAnswer(s); err != nil {
			b.Fatal(err)
		}
	}
}
