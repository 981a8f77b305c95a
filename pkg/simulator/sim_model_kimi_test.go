package simulator_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// post sends a chat completion request and returns the status and the decoded body.
func postChat(t *testing.T, url string, body any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	return resp.StatusCode, out
}

// Kimi's $web_search round trip as the recording has it: a builtin_function call whose
// arguments carry a search_id, then, on the verbatim echo, the answer with markdown
// links; an echo that alters the arguments is refused with 400, like Moonshot.
func TestKimiWebSearchRoundTrip(t *testing.T) {
	t.Parallel()
	url := startSim(t)
	tools := []any{map[string]any{"type": "builtin_function", "function": map[string]any{"name": "$web_search"}}}
	user := map[string]any{"role": "user", "content": "Search the web for the latest news about NATS JetStream"}
	status, r1 := postChat(t, url, map[string]any{"model": "kimi-k2.5", "messages": []any{user}, "tools": tools})
	choice := r1["choices"].([]any)[0].(map[string]any)
	msg := choice["message"].(map[string]any)
	calls, _ := msg["tool_calls"].([]any)
	if status != 200 || choice["finish_reason"] != "tool_calls" || len(calls) != 1 || msg["content"] != "" {
		t.Fatalf("round 1: %d %v", status, r1)
	}
	call := calls[0].(map[string]any)
	fn := call["function"].(map[string]any)
	args := fn["arguments"].(string)
	if call["type"] != "builtin_function" || fn["name"] != "$web_search" || !strings.Contains(args, `"search_id":"`) || !strings.HasPrefix(call["id"].(string), "t-web_search-") {
		t.Fatalf("round 1 call %v", call)
	}
	echo := func(content string) (int, map[string]any) {
		return postChat(t, url, map[string]any{"model": "kimi-k2.5", "tools": tools, "messages": []any{user, msg,
			map[string]any{"role": "tool", "tool_call_id": call["id"], "name": "$web_search", "content": content}}})
	}
	status, r2 := echo(args)
	choice = r2["choices"].([]any)[0].(map[string]any)
	content, _ := choice["message"].(map[string]any)["content"].(string)
	// The answer is about the query: linked pages whose titles and quotes repeat it.
	if status != 200 || choice["finish_reason"] != "stop" || !strings.Contains(content, "](https://") ||
		!strings.Contains(content, "> The latest reports on Search the web for the latest news about NATS JetStream") &&
			!strings.Contains(content, "news about NATS JetStream, simulated result 1 of 5.") {
		t.Fatalf("round 2: %d %v", status, r2)
	}
	// Re-serialised arguments (a client that parsed and re-encoded them) are refused.
	var parsed any
	json.Unmarshal([]byte(args), &parsed)
	altered, _ := json.MarshalIndent(parsed, "", " ")
	status, bad := echo(string(altered))
	if status != http.StatusBadRequest || !strings.Contains(bad["error"].(map[string]any)["message"].(string), "verbatim") {
		t.Errorf("altered echo: %d %v", status, bad)
	}
}
