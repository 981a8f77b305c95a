package responses_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// compactable is a conversation with every kind of turn a compaction handles.
const compactable = `{"model":"m","input":[
	{"role":"developer","content":"Answer briefly."},
	{"role":"user","content":"Remember the code word: slate."},
	{"type":"message","role":"assistant","content":[{"type":"output_text","text":"OK."}]},
	{"role":"user","content":[{"type":"input_text","text":"What is the weather in Paris?"},{"type":"input_image","image_url":"https://example.com/a.png"}]},
	{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"opaque"},
	{"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
	{"type":"function_call_output","call_id":"c1","output":"18 degrees"},
	{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"paris weather","sources":[{"type":"url","url":"https://meteo.example/paris"}]}},
	{"type":"message","role":"assistant","content":[{"type":"output_text","text":"It is 18 degrees."}]}]}`

// The client's own turns are kept as they are, in order; everything else becomes one
// assistant transcript that keeps the order, the calls and the outputs, and drops
// reasoning.
func TestCompactKeepsClientTurnsAndTranscribesTheRest(t *testing.T) {
	t.Parallel()
	req, err := responses.Client.DecodeRequest([]byte(compactable))
	if err != nil {
		t.Fatal(err)
	}
	c, err := responses.Compact(req)
	if err != nil {
		t.Fatal(err)
	}
	var roles []wire.Role
	for _, m := range c.Kept {
		roles = append(roles, m.Role)
	}
	if len(roles) != 3 || roles[0] != wire.RoleSystem || roles[1] != wire.RoleUser || roles[2] != wire.RoleUser || len(c.Kept[2].Parts) != 2 {
		t.Fatalf("kept %+v", c.Kept)
	}
	if c.Summary.Role != wire.RoleAssistant || len(c.Summary.Parts) != 1 {
		t.Fatalf("summary %+v", c.Summary)
	}
	text := c.Summary.Parts[0].Text
	order := []string{"After user message 1:", "The assistant wrote: OK.", "After user message 2:",
		`called the tool get_weather with {"city":"Paris"}`, "The tool get_weather returned: 18 degrees",
		`searched the web for "paris weather"`, "https://meteo.example/paris", "The assistant wrote: It is 18 degrees."}
	at := 0
	for _, want := range order {
		i := strings.Index(text[at:], want)
		if i < 0 {
			t.Fatalf("transcript lacks %q after offset %d:\n%s", want, at, text)
		}
		at += i + len(want)
	}
	if strings.Contains(text, "opaque") {
		t.Fatalf("the reasoning item reached the transcript:\n%s", text)
	}
}

// The compaction item a compaction writes reads back, in a later request, as the
// transcript turn at its place; the kept messages read back as the client's turns.
func TestCompactionOutputReadsBackAsInput(t *testing.T) {
	t.Parallel()
	req, err := responses.Client.DecodeRequest([]byte(compactable))
	if err != nil {
		t.Fatal(err)
	}
	c, err := responses.Compact(req)
	if err != nil {
		t.Fatal(err)
	}
	out, err := responses.CompactionOutput("cmp_x", c)
	if err != nil {
		t.Fatal(err)
	}
	last := out[len(out)-1].(map[string]any)
	if last["type"] != "compaction" || last["id"] == "" {
		t.Fatalf("last item %v", last)
	}
	next := append(out, map[string]any{"type": "message", "role": "user", "content": "Continue."})
	body, _ := json.Marshal(map[string]any{"model": "m", "input": next})
	again, err := responses.Client.DecodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	if again.System != "Answer briefly." {
		t.Fatalf("system %q", again.System)
	}
	msgs := again.Messages
	if len(msgs) != 4 || msgs[0].Role != wire.RoleUser || msgs[1].Role != wire.RoleUser || msgs[2].Role != wire.RoleAssistant || msgs[3].Role != wire.RoleUser {
		t.Fatalf("messages %+v", msgs)
	}
	if msgs[2].Parts[0].Text != c.Summary.Parts[0].Text {
		t.Fatalf("the compaction read back as %q", msgs[2].Parts[0].Text)
	}
	if msgs[1].Parts[1].Kind != wire.PartImage || msgs[1].Parts[1].Image.URL != "https://example.com/a.png" {
		t.Fatalf("the kept image %+v", msgs[1].Parts)
	}
}

// What the fleet cannot compact, or did not write, is a 400 naming the input.
func TestCompactionRefusals(t *testing.T) {
	t.Parallel()
	pending, err := responses.Client.DecodeRequest([]byte(`{"model":"m","input":[{"role":"user","content":"Weather?"},
		{"type":"function_call","call_id":"c9","name":"get_weather","arguments":"{}"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := responses.Compact(pending); err == nil || wire.AsError(err).Status != 400 || !strings.Contains(err.Error(), "c9") {
		t.Fatalf("a pending call: %v", err)
	}
	for _, content := range []string{"plain text", "sfc1.!!!", "sfc1." + "eyJyb2xlIjoidXNlciIsInBhcnRzIjpbXX0"} {
		_, err := responses.Client.DecodeRequest([]byte(`{"model":"m","input":[{"type":"compaction","encrypted_content":"` + content + `"}]}`))
		if e := wire.AsError(err); err == nil || e.Status != 400 || e.Param != "input[0].encrypted_content" {
			t.Fatalf("compaction %q: %v", content, err)
		}
	}
}

// A function_call_output must answer a function_call before it.
func TestFunctionCallOutputNeedsItsCall(t *testing.T) {
	t.Parallel()
	_, err := responses.Client.DecodeRequest([]byte(`{"model":"m","input":[{"role":"user","content":"hi"},
		{"type":"function_call_output","call_id":"call_missing","output":"x"}]}`))
	if e := wire.AsError(err); err == nil || e.Status != 400 || !strings.Contains(e.Message, "call_missing") {
		t.Fatalf("an orphan output: %v", err)
	}
	if _, err := responses.Client.DecodeRequest([]byte(`{"model":"m","input":[{"role":"user","content":"hi"},
		{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},
		{"type":"function_call_output","call_id":"c1","output":"x"}]}`)); err != nil {
		t.Fatalf("an answered call: %v", err)
	}
}
