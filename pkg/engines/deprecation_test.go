package engines_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/engines"
)

// Every engine answer is watched: a Sunset header is counted on each call and
// logged once a day; a 410 is counted and fails the search as it did.
func TestDeprecationWatch(t *testing.T) {
	t.Parallel()
	gone := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Sunset", "Sat, 27 Sep 2026 00:00:00 GMT")
		w.Header().Set("Content-Type", "application/json")
		if gone {
			w.WriteHeader(http.StatusGone)
			w.Write([]byte(`{"error":"this endpoint is retired"}`))
			return
		}
		w.Write(fixtures.Read("tavily/pydantic-test_basic_search.response.json"))
	}))
	defer srv.Close()
	var mu sync.Mutex
	counts := map[string]int{}
	var logs bytes.Buffer
	reg, err := engines.FromConfigWith([]engines.Config{{ID: "tv", Kind: "tavily", BaseURL: srv.URL, APIKey: "k"}}, srv.Client(), engines.Options{
		Log:         slog.New(slog.NewTextHandler(&logs, nil)),
		Deprecation: func(engine, signal string) { mu.Lock(); counts[engine+" "+signal]++; mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	eng, _ := reg.Get("tv")
	for range 2 {
		if _, err := eng.Search(context.Background(), engines.Query{Query: "q"}); err != nil {
			t.Fatal(err)
		}
	}
	gone = true
	if _, err := eng.Search(context.Background(), engines.Query{Query: "q"}); err == nil {
		t.Fatal("a 410 answer succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if counts["tv sunset"] != 3 || counts["tv 410"] != 1 {
		t.Errorf("counts = %v, want 3 sunset and one 410", counts)
	}
	if n := strings.Count(logs.String(), "deprecated or gone"); n != 1 {
		t.Errorf("%d warnings logged, want one a day:\n%s", n, logs.String())
	}
}
