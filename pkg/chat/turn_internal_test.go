package chat

import (
	"encoding/json"
	"testing"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// A hop's answer is kept as the model gave it: its thinking block with its signature,
// its text blocks, then its call.
func TestTurnKeepsTheAnswersParts(t *testing.T) {
	t.Parallel()
	answer, err := anthropic.Model.DecodeResponse(fixtures.Read("anthropic/pydantic-pause-turn.0.response.json"))
	if err != nil {
		t.Fatal(err)
	}
	answer.Content = append(answer.Content, wire.Part{Kind: wire.PartToolCall, Call: &wire.ToolCall{ID: "c1", Name: "web_search", Arguments: `{"query":"weather in Paris"}`}})
	canonical, _ := json.Marshal(&turn{Turn: *wire.TurnOf(answer), Offered: true})
	v := searchedView(t, canonical)
	if _, ok := v.turn(0); !ok {
		t.Fatal("the stored turn does not read")
	}
	got, _ := v.history(1)
	if len(got) != 2 || got[0].Role != wire.RoleAssistant || got[1].Role != wire.RoleTool {
		t.Fatalf("history %+v; want the answer, then its result", got)
	}
	parts := got[0].Parts
	if first := parts[0]; first.Kind != wire.PartReasoning || first.Reasoning.Signature == "" || first.Reasoning.Signature != answer.Content[0].Reasoning.Signature {
		t.Errorf("the answer does not open with its signed thinking block: %+v", first)
	}
	if last := parts[len(parts)-1]; last.Kind != wire.PartToolCall || last.Call.ID != "c1" {
		t.Errorf("the answer does not end with its call: %+v", last)
	}
	blocks := 0
	for _, p := range answer.Content {
		if p.Kind == wire.PartText {
			blocks++
		}
	}
	if n := count(parts, wire.PartText); n != blocks || blocks < 2 {
		t.Errorf("%d text blocks kept of the answer's %d", n, blocks)
	}
}

func count(parts []wire.Part, kind wire.PartKind) int {
	n := 0
	for _, p := range parts {
		if p.Kind == kind {
			n++
		}
	}
	return n
}
