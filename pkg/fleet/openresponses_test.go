package fleet_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/openresponses"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
)

// complianceCases are the scenarios the Open Responses compliance suite runs (a plain
// answer, a stream, a system message, a function tool called because the question is
// about it, streamed too, an image by URL and as a data URL, a PDF file, a
// conversation, web search, offline web search forced by tool_choice), each with what
// its answer must show besides every required field.
var complianceCases = []struct {
	name   string
	stream bool
	input  string // the request's input and tools, JSON
	want   func(out []map[string]any, evs []openresponses.Event) string
}{
	{"basic", false, `"input":[{"type":"message","role":"user","content":"Say hello in exactly 3 words."}]`, hasOutput},
	{"stream", true, `"input":[{"type":"message","role":"user","content":"Count from 1 to 5."}]`, hasOutput},
	{"system prompt", false, `"input":[{"type":"message","role":"system","content":"You are a pirate."},{"type":"message","role":"user","content":"Say hello."}]`, hasOutput},
	{"tool calling", false, `"input":[{"type":"message","role":"user","content":"What's the weather like in San Francisco?"}],` + weatherTool, hasItem("function_call")},
	{"tool calling stream", true, `"input":[{"type":"message","role":"user","content":"What's the weather like in San Francisco?"}],` + weatherTool, streamedCall},
	{"image input", false, `"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"What do you see? sim:nosearch"},{"type":"input_image","image_url":"https://example.com/logo.png"}]}]`, hasOutput},
	{"image data URL", false, `"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"What do you see in this image? Answer in one sentence."},{"type":"input_image","image_url":"data:image/png;base64,` + tinyPNG + `"}]}]`, hasOutput},
	{"file input", false, `"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Read the attached file and answer with its title only."},{"type":"input_file","filename":"fixture.pdf","file_data":"data:application/pdf;base64,` + titlePDF() + `"}]}]`, hasOutput},
	{"offline web search", false, `"input":"Find the most relevant cached result for OpenResponses.","tools":[{"type":"web_search","external_web_access":false}],"tool_choice":{"type":"web_search"},"include":["web_search_call.action.sources"]`, hasItem("web_search_call")},
	{"web search", false, `"input":"Search the web: who won the 2022 world cup?","tools":[{"type":"web_search"}]`, hasItem("web_search_call")},
	{"web search stream", true, `"input":"Search the web: who won the 2022 world cup?","tools":[{"type":"web_search"}]`, hasItem("web_search_call")},
	{"multi-turn", false, `"input":[{"type":"message","role":"user","content":"My name is Alice."},{"type":"message","role":"assistant","content":"Hello Alice!"},{"type":"message","role":"user","content":"What is my name?"}]`, hasOutput},
}

// weatherTool is the function tool of the suite's tool-calling scenarios.
const weatherTool = `"tools":[{"type":"function","name":"get_weather","description":"Get the current weather for a location",
	"parameters":{"type":"object","properties":{"location":{"type":"string","description":"The city and state, e.g. San Francisco, CA"}},"required":["location"]}}]`

// tinyPNG is a 1×1 PNG.
const tinyPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

// titlePDF is a one-page PDF that shows one line of text, base64.
func titlePDF() string {
	content := "BT /F1 12 Tf 72 72 Td (Title: Fleet Conformance Fixture) Tj ET"
	var b bytes.Buffer
	b.WriteString("%PDF-1.1\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n2 0 obj\n<< /Type /Pages /Kids [3 0 R] /Count 1 >>\nendobj\n")
	b.WriteString("3 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 144] /Contents 4 0 R >>\nendobj\n")
	fmt.Fprintf(&b, "4 0 obj\n<< /Length %d >>\nstream\n%s\nendstream\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%%%EOF", len(content), content)
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

func hasItem(typ string) func([]map[string]any, []openresponses.Event) string {
	return func(out []map[string]any, evs []openresponses.Event) string {
		for _, it := range out {
			if it["type"] == typ {
				return ""
			}
		}
		return "no " + typ + " item"
	}
}

func hasOutput(out []map[string]any, _ []openresponses.Event) string {
	if len(out) == 0 {
		return "no output items"
	}
	return ""
}

// streamedCall: a streamed function call is announced by output_item.added, its
// arguments arrive as deltas and a done event, and output_item.done closes it.
func streamedCall(out []map[string]any, evs []openresponses.Event) string {
	if msg := hasItem("function_call")(out, evs); msg != "" {
		return msg
	}
	seen := map[string]bool{}
	for _, e := range evs {
		var o struct {
			Type string `json:"type"`
			Item struct {
				Type string `json:"type"`
			} `json:"item"`
		}
		json.Unmarshal(e.Data, &o)
		seen[o.Type+"/"+o.Item.Type] = true
	}
	for _, want := range []string{"response.output_item.added/function_call", "response.function_call_arguments.delta/",
		"response.function_call_arguments.done/", "response.output_item.done/function_call"} {
		if !seen[want] {
			return "no " + want + " event"
		}
	}
	return ""
}

// Every model the fleet lists answers each compliance scenario with a response
// object that has every required field, with its type; a streamed one sends only
// events of the specification's shapes, in sequence, ending in response.completed.
func TestOpenResponsesComplianceEveryModel(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	for _, m := range listedModels(t, f) {
		for _, c := range complianceCases {
			t.Run(m+"/"+c.name, func(t *testing.T) {
				final, evs := respond(t, f, fmt.Sprintf(`{"model":%q,"stream":%v,%s}`, m, c.stream, c.input), c.stream)
				var out []map[string]any
				b, _ := json.Marshal(final["output"])
				json.Unmarshal(b, &out)
				if msg := c.want(out, evs); msg != "" {
					t.Errorf("%s: %s", msg, b)
				}
				if !strings.HasPrefix(c.name, "tool calling") && final["status"] != "completed" {
					t.Errorf("status %v", final["status"])
				}
			})
		}
	}
}

// The suite's two-turn scenarios, for every model: a response continued by
// previous_response_id, and a forced function call whose output is sent back with
// previous_response_id; both second answers complete with output.
func TestOpenResponsesComplianceTwoTurnsEveryModel(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	for _, m := range listedModels(t, f) {
		t.Run(m+"/previous response id", func(t *testing.T) {
			first, _ := respond(t, f, fmt.Sprintf(`{"model":%q,"input":"Remember this code word: papaya. Reply with only OK."}`, m), false)
			second, _ := respond(t, f, fmt.Sprintf(`{"model":%q,"previous_response_id":%q,"input":"What code word did I ask you to remember?"}`, m, first["id"]), false)
			if second["status"] != "completed" || second["previous_response_id"] != first["id"] {
				t.Errorf("second: status %v, previous_response_id %v", second["status"], second["previous_response_id"])
			}
			if out, _ := second["output"].([]any); len(out) == 0 {
				t.Error("second: no output")
			}
		})
		t.Run(m+"/function call round trip", func(t *testing.T) {
			first, _ := respond(t, f, fmt.Sprintf(`{"model":%q,"input":"Use the weather tool to get the temperature in San Francisco.",%s,
				"tool_choice":{"type":"function","name":"get_weather"}}`, m, weatherTool), false)
			if tc, _ := first["tool_choice"].(map[string]any); tc["type"] != "function" || tc["name"] != "get_weather" {
				t.Errorf("tool_choice echoed as %v", first["tool_choice"])
			}
			callID := ""
			out, _ := first["output"].([]any)
			for _, it := range out {
				if im, _ := it.(map[string]any); im["type"] == "function_call" && im["name"] == "get_weather" {
					callID, _ = im["call_id"].(string)
				}
			}
			if callID == "" {
				t.Fatalf("the forced tool was not called: %v", out)
			}
			second, _ := respond(t, f, fmt.Sprintf(`{"model":%q,"previous_response_id":%q,
				"input":[{"type":"function_call_output","call_id":%q,"output":"64 degrees and clear"}]}`, m, first["id"], callID), false)
			if out, _ := second["output"].([]any); second["status"] != "completed" || len(out) == 0 {
				t.Errorf("second: status %v, output %v", second["status"], second["output"])
			}
		})
	}
}

// A reasoning search (the OpenAI SDK quickstart's question, reasoning summaries asked
// for) answered whole and streamed gives the same kinds of output item, for every
// model: a streamed answer keeps the reasoning summary item the whole one has, its
// text sent as summary deltas, and both messages carry url_citation annotations.
func TestOpenResponsesComplianceReasoningStreamedLikeWholeEveryModel(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	for _, m := range listedModels(t, f) {
		t.Run(m, func(t *testing.T) {
			req := fmt.Sprintf(`{"model":%q,"stream":%%v,"input":"Search the web: latest Go release?",
				"tools":[{"type":"web_search"}],"reasoning":{"effort":"low","summary":"auto"}}`, m)
			whole, _ := respond(t, f, fmt.Sprintf(req, false), false)
			streamed, evs := respond(t, f, fmt.Sprintf(req, true), true)
			wantKinds, gotKinds := itemKinds(t, whole), itemKinds(t, streamed)
			if !slices.Equal(gotKinds, wantKinds) {
				t.Errorf("streamed output items %v, whole %v", gotKinds, wantKinds)
			}
			if slices.Contains(gotKinds, "reasoning") && !hasEvent(evs, "response.reasoning_summary_text.delta") {
				t.Error("a reasoning item without response.reasoning_summary_text.delta events")
			}
		})
	}
}

// itemKinds are the sorted types of a response's output items, with "url_citation"
// once for a message that has url_citation annotations; it fails the test without a
// cited message.
func itemKinds(t *testing.T, r map[string]any) []string {
	t.Helper()
	var out []struct {
		Type    string `json:"type"`
		Content []struct {
			Annotations []struct {
				Type string `json:"type"`
			} `json:"annotations"`
		} `json:"content"`
	}
	b, _ := json.Marshal(r["output"])
	json.Unmarshal(b, &out)
	var kinds []string
	for _, it := range out {
		kinds = append(kinds, it.Type)
		for _, c := range it.Content {
			if len(c.Annotations) > 0 && c.Annotations[0].Type == "url_citation" {
				kinds = append(kinds, "url_citation")
			}
		}
	}
	if !slices.Contains(kinds, "url_citation") {
		t.Errorf("no message with url_citation annotations: %s", b)
	}
	slices.Sort(kinds)
	return slices.Compact(kinds)
}

// hasEvent reports whether evs has an event of type typ.
func hasEvent(evs []openresponses.Event, typ string) bool {
	for _, e := range evs {
		var o struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(e.Data, &o) == nil && o.Type == typ {
			return true
		}
	}
	return false
}

// listedModels are the models GET /v1/models lists.
func listedModels(t *testing.T, f *fleettest.Fleet) []string {
	status, body, _ := f.Do(t, "GET", "/v1/models", nil)
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if status != 200 || json.Unmarshal(body, &list) != nil || len(list.Data) == 0 {
		t.Fatalf("models: %d %s", status, body)
	}
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	return ids
}

// respond posts a Responses request and checks the answer against the
// specification: the response object (the final snapshot when streamed) and, when
// streamed, every event.
func respond(t *testing.T, f *fleettest.Fleet, req string, stream bool) (map[string]any, []openresponses.Event) {
	t.Helper()
	resp, err := http.Post(f.URL+"/v1/responses", "application/json", strings.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw bytes.Buffer
	raw.ReadFrom(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("HTTP %d: %s", resp.StatusCode, raw.Bytes())
	}
	var final map[string]any
	var evs []openresponses.Event
	if stream {
		evs = sseEvents(t, raw.Bytes())
		for _, e := range openresponses.CheckEvents(evs) {
			t.Error(e)
		}
		for _, e := range evs {
			var o map[string]any
			if json.Unmarshal(e.Data, &o) == nil && o["type"] == "response.completed" {
				final, _ = o["response"].(map[string]any)
			}
		}
	} else if err := json.Unmarshal(raw.Bytes(), &final); err != nil {
		t.Fatal(err)
	}
	if final == nil {
		t.Fatalf("no final response: %s", raw.Bytes())
	}
	for _, e := range openresponses.CheckResponse("response", final) {
		t.Error(e)
	}
	return final, evs
}

// sseEvents splits a server-sent event stream into its events (comments left out).
func sseEvents(t *testing.T, b []byte) []openresponses.Event {
	var evs []openresponses.Event
	var cur openresponses.Event
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event:"):
			cur.Name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			cur.Data = []byte(strings.TrimSpace(strings.TrimPrefix(line, "data:")))
		case line == "":
			if cur.Data != nil {
				evs = append(evs, cur)
			}
			cur = openresponses.Event{}
		}
	}
	if len(evs) == 0 {
		t.Fatalf("no events: %s", b)
	}
	return evs
}
