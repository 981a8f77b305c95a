package fleet_test

import (
	"encoding/json"
	"testing"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
)

// offered counts the model requests that carried the web_search tool.
func offered(f *fleettest.Fleet) int64 { return f.Sim.Stats().Requests["model_offered_web_search"] }

func chatMessages(t *testing.T, f *fleettest.Fleet, msgs []any, extra map[string]any) map[string]any {
	t.Helper()
	body := map[string]any{"model": demo.Model, "messages": msgs}
	for k, v := range extra {
		body[k] = v
	}
	status, b, _ := f.Do(t, "POST", "/v1/chat/completions", body)
	if status != 200 {
		t.Fatalf("status %d: %s", status, b)
	}
	var resp map[string]any
	json.Unmarshal(b, &resp)
	return resp
}

func user(text string) map[string]any { return map[string]any{"role": "user", "content": text} }

// "sim:search" makes the scripted model search whenever it is offered the tool, while
// carrying no search intent of its own.
const noIntent = "what is the capital of France? sim:search"

// selective offers web_search only when the latest user message shows search intent.
func TestSelectiveOffersOnIntentOnly(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Policy("selective"))
	f.Chat(t, noIntent)
	if n := offered(f); n != 0 {
		t.Fatalf("offered on %d model calls without intent", n)
	}
	_, resp := f.Chat(t, "帮我搜一下最新新闻 sim:search")
	if n := offered(f); n != 2 {
		t.Fatalf("offered on %d model calls of a job with intent, want 2 (both hops)", n)
	}
	if s := resp["searchfleet"].(map[string]any)["searches"].(float64); s != 1 {
		t.Errorf("searches %v", s)
	}
}

// always offers web_search on every model call.
func TestAlwaysOffers(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Policy("always"))
	_, resp := f.Chat(t, noIntent)
	if n := offered(f); n != 2 {
		t.Fatalf("offered on %d model calls, want 2", n)
	}
	if s := resp["searchfleet"].(map[string]any)["searches"].(float64); s != 1 {
		t.Errorf("searches %v, want 1", s)
	}
}

// A sticky chain keeps the tool across every hop of one request, and drops it on the
// next request once an answer ended with finish_reason "stop".
func TestStickyAcrossHopsDroppedOnNextRequest(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Policy("selective"))
	first := user("Search the web for the news sim:hops=3")
	resp := chatMessages(t, f, []any{first}, nil)
	if n := offered(f); n != 4 {
		t.Fatalf("offered on %d of the 4 hops", n)
	}
	answer := resp["choices"].([]any)[0].(map[string]any)["message"]
	chatMessages(t, f, []any{first, answer, user(noIntent)}, nil)
	if n := offered(f); n != 4 {
		t.Fatalf("the next request (after a stop answer, no intent) was offered the tool: %d", n)
	}
}

// A chain that ends in the client's own tool calls continues in the client's next
// request: the tool stays offered there, though that request's user message has no
// intent; once it ends with "stop", it is dropped.
func TestStickyThroughClientToolCalls(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Policy("selective"))
	tools := map[string]any{"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_stock", "parameters": map[string]any{"type": "object"}}}}}
	first := user("Search the web for the latest news sim:tool=get_stock")
	resp := chatMessages(t, f, []any{first}, tools)
	msg := resp["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	call := msg["tool_calls"].([]any)[0].(map[string]any)
	before := offered(f)
	if before != 1 {
		t.Fatalf("first request offered %d times", before)
	}
	result := map[string]any{"role": "tool", "tool_call_id": call["id"], "content": `{"price": 42}`}
	chatMessages(t, f, []any{first, msg, result, user(noIntent)}, tools)
	if n := offered(f) - before; n != 2 {
		t.Fatalf("the continued chain was offered the tool %d times, want 2 (sticky)", n)
	}
	before = offered(f)
	chatMessages(t, f, []any{user(noIntent)}, tools)
	if n := offered(f) - before; n != 0 {
		t.Fatalf("an unrelated request was offered the tool %d times", n)
	}
}
