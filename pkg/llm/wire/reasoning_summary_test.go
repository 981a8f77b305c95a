package wire_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/responses"

	"github.com/searchfleet/searchfleet/internal/openresponses"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	llmresponses "github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// chainAnswer is a model's answer as a Responses client's job ends with it: decoded by
// the model codec, stored as the chain's Chat answer, read back by the Chat codec.
func chainAnswer(t *testing.T, model *wire.Response, echo string) *wire.Response {
	t.Helper()
	msg, finish, _ := wire.ChatAnswer(model)
	body, _ := json.Marshal(map[string]any{"id": "x", "object": "chat.completion", "created": 1700000000, "model": "m",
		"choices": []any{map[string]any{"index": 0, "message": json.RawMessage(msg), "finish_reason": finish}}})
	r, err := openaichat.Client.DecodeResponse(body)
	if err != nil {
		t.Fatal(err)
	}
	r.ID, r.Created, r.Status = "resp_job1", time.Unix(1700000000, 0), wire.StatusCompleted
	if echo != "" {
		r.Echo = llmresponses.Echo([]byte(echo))
	}
	return r
}

// A Responses client gets the model's reasoning as a reasoning item before the
// message, non-streamed and streamed, in shapes openai-go reads: a Responses model's
// own summaries always (never its encrypted_content, which is the fleet's call's),
// another protocol's readable reasoning (an Anthropic thinking block here) only when
// the request asked for a summary (reasoning.summary).
func TestResponsesClientsReceiveReasoningSummaries(t *testing.T) {
	t.Parallel()
	thinking := "The user asks who won; I should search first."
	claude := &wire.Response{Stop: wire.StopEndTurn, Content: []wire.Part{
		{Kind: wire.PartReasoning, Reasoning: &wire.Reasoning{Protocol: wire.AnthropicMessages, Text: thinking, Signature: "sig"}},
		{Kind: wire.PartReasoning, Reasoning: &wire.Reasoning{Protocol: wire.AnthropicMessages, Redacted: "opaque"}},
		{Kind: wire.PartText, Text: "The answer."}}}
	own := &wire.Response{Stop: wire.StopEndTurn, Content: []wire.Part{
		{Kind: wire.PartReasoning, Reasoning: &wire.Reasoning{Protocol: wire.OpenAIResponses, ID: "rs_abc", Summary: []string{"First I look.", "Then I answer."}, Encrypted: "gAAAA-secret"}},
		{Kind: wire.PartText, Text: "The answer."}}}
	asked := `{"model":"m","input":"q","reasoning":{"effort":"low","summary":"auto"}}`
	cases := []struct {
		name    string
		model   *wire.Response
		echo    string
		id      string
		summary []string
	}{
		{"anthropic thinking, summary asked", claude, asked, "rs_resp_job1_0", []string{thinking}},
		{"anthropic thinking, no summary asked", claude, `{"model":"m","input":"q","reasoning":{"effort":"low"}}`, "", nil},
		{"responses summaries", own, "", "rs_abc", []string{"First I look.", "Then I answer."}},
	}
	for _, c := range cases {
		answer := chainAnswer(t, c.model, c.echo)
		b, err := llmresponses.Client.EncodeResponse(answer)
		if err != nil {
			t.Fatal(err)
		}
		var r responses.Response
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "encrypted_content") {
			t.Errorf("%s: the answer gives the fleet's encrypted_content: %s", c.name, b)
		}
		if c.id == "" {
			if len(r.Output) != 1 || r.Output[0].Type != "message" {
				t.Errorf("%s: output %s", c.name, b)
			}
			continue
		}
		if len(r.Output) != 2 || r.Output[0].Type != "reasoning" || r.Output[1].Type != "message" || r.OutputText() != "The answer." {
			t.Fatalf("%s: output %s", c.name, b)
		}
		if got := summaryOf(r.Output[0].AsReasoning()); r.Output[0].ID != c.id || fmt.Sprint(got) != fmt.Sprint(c.summary) {
			t.Errorf("%s: reasoning item %s, summary %q; want id %s, summary %q", c.name, r.Output[0].RawJSON(), got, c.id, c.summary)
		}

		// Streamed, the whole answer at the end and with its text streamed first: the
		// events conform, openai-go reads them, the summary parts rebuild the item, and
		// the item's output_index is its place in the completed response.
		for _, textFirst := range []bool{false, true} {
			st := llmresponses.Client.NewStream()
			start := *answer
			start.Status, start.Content = wire.StatusInProgress, nil
			evs := st.Start(&start)
			if textFirst {
				partial := start
				partial.Content = []wire.Part{{Kind: wire.PartText, Text: "The ans"}}
				evs = append(evs, st.Update(&partial)...)
			}
			evs = append(evs, st.Finish(answer)...)
			for _, e := range openresponses.CheckEvents(events(evs)) {
				t.Errorf("%s (text first %v): %s", c.name, textFirst, e)
			}
			var texts, added []string
			index, done := int64(-1), responses.ResponseReasoningItem{}
			var last responses.ResponseStreamEventUnion
			for i, e := range evs {
				if err := json.Unmarshal(e.Data, &last); err != nil || last.Type != e.Name || last.SequenceNumber != int64(i) {
					t.Fatalf("event %d %s: %v", i, e.Data, err)
				}
				switch last.Type {
				case "response.reasoning_summary_text.delta":
					ev := last.AsResponseReasoningSummaryTextDelta()
					if int(ev.SummaryIndex) == len(texts) {
						texts = append(texts, "")
					}
					texts[ev.SummaryIndex] += ev.Delta
				case "response.output_item.added":
					added = append(added, last.AsResponseOutputItemAdded().Item.Type)
				case "response.output_item.done":
					if ev := last.AsResponseOutputItemDone(); ev.Item.Type == "reasoning" {
						index, done = ev.OutputIndex, ev.Item.AsReasoning()
					}
				}
			}
			out := last.Response.Output
			if last.Type != "response.completed" || index < 0 || int(index) >= len(out) || out[index].Type != "reasoning" || out[index].ID != c.id {
				t.Fatalf("%s (text first %v): reasoning item at %d of %s", c.name, textFirst, index, last.RawJSON())
			}
			if fmt.Sprint(texts) != fmt.Sprint(c.summary) || fmt.Sprint(summaryOf(done)) != fmt.Sprint(c.summary) || last.Response.OutputText() != "The answer." {
				t.Errorf("%s (text first %v): streamed summary %q, item %q; want %q", c.name, textFirst, texts, summaryOf(done), c.summary)
			}
			// Asked for a summary, a stream sends the reasoning item before the
			// message, as the whole answer lists them, even when the model's text
			// came first.
			if c.echo == asked {
				var whole, completed []string
				for _, it := range r.Output {
					whole = append(whole, it.Type)
				}
				for _, it := range out {
					completed = append(completed, it.Type)
				}
				if fmt.Sprint(added) != fmt.Sprint(whole) || fmt.Sprint(completed) != fmt.Sprint(whole) {
					t.Errorf("%s (text first %v): items added %v, completed %v; the whole answer has %v", c.name, textFirst, added, completed, whole)
				}
			}
		}
	}
}

func summaryOf(it responses.ResponseReasoningItem) []string {
	var out []string
	for _, s := range it.Summary {
		out = append(out, s.Text)
	}
	return out
}
