package fleet_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/fleettest"
	"github.com/searchfleet/searchfleet/internal/openresponses"
)

// complianceCases are the scenarios the Open Responses compliance suite runs (a plain
// answer, a stream, a system message, a function tool, an image, a conversation, web
// search), each with what its answer must show besides every required field.
var complianceCases = []struct {
	name   string
	stream bool
	input  string // the request's input and tools, JSON
	want   func(out []map[string]any) string
}{
	{"basic", false, `"input":[{"type":"message","role":"user","content":"Say hello in exactly 3 words."}]`, hasOutput},
	{"stream", true, `"input":[{"type":"message","role":"user","content":"Count from 1 to 5."}]`, hasOutput},
	{"system prompt", false, `"input":[{"type":"message","role":"system","content":"You are a pirate."},{"type":"message","role":"user","content":"Say hello."}]`, hasOutput},
	{"tool calling", false, `"input":[{"type":"message","role":"user","content":"What's the weather like in San Francisco? sim:tool=get_weather sim:nosearch"}],
	  "tools":[{"type":"function","name":"get_weather","description":"Get the weather","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}]`,
		func(out []map[string]any) string {
			for _, it := range out {
				if it["type"] == "function_call" {
					return ""
				}
			}
			return "no function_call item"
		}},
	{"image input", false, `"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"What do you see? sim:nosearch"},{"type":"input_image","image_url":"https://example.com/logo.png"}]}]`, hasOutput},
	{"web search", false, `"input":"Search the web: who won the 2022 world cup?","tools":[{"type":"web_search"}]`, hasSearch},
	{"web search stream", true, `"input":"Search the web: who won the 2022 world cup?","tools":[{"type":"web_search"}]`, hasSearch},
	{"multi-turn", false, `"input":[{"type":"message","role":"user","content":"My name is Alice."},{"type":"message","role":"assistant","content":"Hello Alice!"},{"type":"message","role":"user","content":"What is my name?"}]`, hasOutput},
}

func hasSearch(out []map[string]any) string {
	for _, it := range out {
		if it["type"] == "web_search_call" {
			return hasOutput(out)
		}
	}
	return "no web_search_call item"
}

func hasOutput(out []map[string]any) string {
	if len(out) == 0 {
		return "no output items"
	}
	return ""
}

// Every model the fleet lists answers each compliance scenario with a response
// object that has every required field, with its type; a streamed one sends only
// events of the specification's shapes, in sequence, ending in response.completed.
func TestOpenResponsesComplianceEveryModel(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	status, body, _ := f.Do(t, "GET", "/v1/models", nil)
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if status != 200 || json.Unmarshal(body, &list) != nil || len(list.Data) == 0 {
		t.Fatalf("models: %d %s", status, body)
	}
	for _, m := range list.Data {
		for _, c := range complianceCases {
			t.Run(m.ID+"/"+c.name, func(t *testing.T) {
				req := fmt.Sprintf(`{"model":%q,"stream":%v,%s}`, m.ID, c.stream, c.input)
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
				if c.stream {
					evs := sseEvents(t, raw.Bytes())
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
				var out []map[string]any
				b, _ := json.Marshal(final["output"])
				json.Unmarshal(b, &out)
				if msg := c.want(out); msg != "" {
					t.Errorf("%s: %s", msg, raw.Bytes())
				}
				if c.name != "tool calling" && final["status"] != "completed" {
					t.Errorf("status %v", final["status"])
				}
			})
		}
	}
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
