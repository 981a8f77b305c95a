package simulator_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/simulator"
)

func postJSON(t *testing.T, url string, body any, header map[string]string) (int, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// The simulator's Claude, asked to think, signs its thinking and refuses a follow-up
// whose thinking was altered or dropped, with Anthropic's status and words; a forced
// tool_choice is honoured.
func TestSimulatorClaudeIsStrictAboutThinking(t *testing.T) {
	sim := simulator.New(simulator.Options{})
	hs, url, err := sim.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	h := map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01"}
	tools := []any{map[string]any{"name": "get_weather", "input_schema": map[string]any{"type": "object"}}}
	first := map[string]any{"model": "sim-scripted", "max_tokens": 4096, "thinking": map[string]any{"type": "enabled", "budget_tokens": 2048}, "tools": tools,
		"tool_choice": map[string]any{"type": "tool", "name": "get_weather"},
		"messages":    []any{map[string]any{"role": "user", "content": "Paris sim:nosearch"}}}
	status, body := postJSON(t, url+"/v1/messages", first, h)
	var msg struct {
		Content []map[string]any `json:"content"`
	}
	json.Unmarshal([]byte(body), &msg)
	if status != 200 || len(msg.Content) < 2 || msg.Content[0]["type"] != "thinking" || msg.Content[len(msg.Content)-1]["type"] != "tool_use" {
		t.Fatalf("%d %s", status, body)
	}
	use := msg.Content[len(msg.Content)-1]
	follow := func(assistant []map[string]any) (int, string) {
		next := map[string]any{}
		for k, v := range first {
			next[k] = v
		}
		delete(next, "tool_choice")
		next["messages"] = []any{first["messages"].([]any)[0], map[string]any{"role": "assistant", "content": assistant},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": use["id"], "content": "18C"}}}}
		return postJSON(t, url+"/v1/messages", next, h)
	}
	if status, body := follow(msg.Content); status != 200 {
		t.Fatalf("the intact follow-up was refused: %d %s", status, body)
	}
	altered := append([]map[string]any{{"type": "thinking", "thinking": msg.Content[0]["thinking"].(string) + ".", "signature": msg.Content[0]["signature"]}}, msg.Content[1:]...)
	if status, body := follow(altered); status != 400 || !strings.Contains(body, "messages.1.content.0: Invalid `signature` in `thinking` block") || !strings.Contains(body, `"invalid_request_error"`) {
		t.Errorf("altered thinking: %d %s", status, body)
	}
	if status, body := follow(msg.Content[1:]); status != 400 || !strings.Contains(body, "Expected `thinking` or `redacted_thinking`, but found `tool_use`") {
		t.Errorf("dropped thinking: %d %s", status, body)
	}
}

// The simulator's Responses reasoning model (reasoning.effort set, or a reasoning
// model's name asked nothing) puts a reasoning item before its function call, with
// encrypted_content when included, and refuses a follow-up as OpenAI does: the item
// by its id alone under store false (404, "Items are not persisted when `store` is
// set to false"), altered encrypted content (invalid_encrypted_content), the call
// without its item. A non-reasoning model asked nothing gives no reasoning item.
func TestSimulatorResponsesIsStrictAboutReasoningItems(t *testing.T) {
	sim := simulator.New(simulator.Options{})
	hs, url, err := sim.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	h := map[string]string{"Authorization": "Bearer k"}
	tools := []any{map[string]any{"type": "function", "name": "get_weather", "parameters": map[string]any{"type": "object"}}}
	ask := map[string]any{"role": "user", "content": "Paris sim:tool=get_weather sim:nosearch"}
	first := func(model string) []map[string]any {
		status, body := postJSON(t, url+"/v1/responses", map[string]any{"model": model, "store": false, "tools": tools,
			"include": []string{"reasoning.encrypted_content"}, "input": []any{ask}}, h)
		var resp struct {
			Output []map[string]any `json:"output"`
		}
		if json.Unmarshal([]byte(body), &resp); status != 200 {
			t.Fatalf("%s: %d %s", model, status, body)
		}
		return resp.Output
	}
	if out := first("gpt-4.1"); out[0]["type"] == "reasoning" {
		t.Errorf("a model that does not reason gave a reasoning item: %v", out)
	}
	out := first("gpt-5-mini")
	if len(out) != 2 || out[0]["type"] != "reasoning" || out[0]["encrypted_content"] == nil || out[1]["type"] != "function_call" {
		t.Fatalf("a reasoning model asked nothing: output %v", out)
	}
	follow := func(items ...map[string]any) (int, string) {
		input := []any{ask}
		for _, it := range items {
			input = append(input, it)
		}
		input = append(input, map[string]any{"type": "function_call_output", "call_id": out[1]["call_id"], "output": "18C"})
		return postJSON(t, url+"/v1/responses", map[string]any{"model": "gpt-5-mini", "store": false, "tools": tools, "input": input}, h)
	}
	if status, body := follow(out...); status != 200 {
		t.Fatalf("the intact follow-up was refused: %d %s", status, body)
	}
	byID := map[string]any{"type": "reasoning", "id": out[0]["id"], "summary": []any{}}
	want := "Item with id '" + out[0]["id"].(string) + "' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input."
	if status, body := follow(byID, out[1]); status != 404 || !strings.Contains(body, want) || !strings.Contains(body, `"param":"input"`) {
		t.Errorf("the item by id under store false: %d %s", status, body)
	}
	altered := map[string]any{"type": "reasoning", "id": out[0]["id"], "summary": []any{}, "encrypted_content": "x" + out[0]["encrypted_content"].(string)}
	if status, body := follow(altered, out[1]); status != 400 || !strings.Contains(body, "invalid_encrypted_content") {
		t.Errorf("altered encrypted content: %d %s", status, body)
	}
	if status, body := follow(out[1]); status != 400 || !strings.Contains(body, "without its required 'reasoning' item") {
		t.Errorf("the call without its reasoning item: %d %s", status, body)
	}
}
