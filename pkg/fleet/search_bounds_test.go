package fleet_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
)

// A search whose result is 2 MB (five 400 KB snippets) is cut to the fleet's bounds
// before it is stored and published: the chat that searched answers, and a direct
// search returns the cut result with a warning saying so.
func TestHugeSearchResultIsCut(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	status, b, _ := f.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": demo.Model, "messages": []any{map[string]any{"role": "user", "content": "Search the web: tide tables Brest today? sim:engine=tavily sim:huge"}}})
	var chat struct {
		Searchfleet struct {
			Searches int `json:"searches"`
		} `json:"searchfleet"`
	}
	json.Unmarshal(b, &chat)
	if status != http.StatusOK || chat.Searchfleet.Searches != 1 {
		t.Fatalf("a chat whose search found 2 MB: %d %.300s", status, b)
	}
	status, b, _ = f.Do(t, "POST", "/v1/search", map[string]any{"query": "tide tables Brest sim:huge", "engine": "tavily"})
	if status != http.StatusOK {
		t.Fatalf("a direct search of 2 MB: %d %.300s", status, b)
	}
	if len(b) > 1<<20 {
		t.Errorf("the direct search answered %d bytes, want the result cut", len(b))
	}
	var out struct {
		Result struct {
			Hits []struct {
				Snippet string `json:"snippet"`
			} `json:"hits"`
			Warnings []string `json:"warnings"`
		} `json:"result"`
	}
	json.Unmarshal(b, &out)
	if len(out.Result.Hits) == 0 || len(out.Result.Hits[0].Snippet) > 4000 || !strings.Contains(strings.Join(out.Result.Warnings, " "), "cut to fit") {
		t.Errorf("the cut result: %d hits, warnings %q", len(out.Result.Hits), out.Result.Warnings)
	}
}
