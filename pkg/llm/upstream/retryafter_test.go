package upstream_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/intent"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/gemini"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream/upstreamtest"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// A model provider's wait is read by the provider layer's one rule, whatever form it
// takes: OpenAI's retry-after-ms (ignored by the model callers before), Anthropic's
// rate-limit reset headers, Google's RetryInfo in the error body. Each case is a 429
// over real HTTP, to the callers of every protocol.
func TestModelRetryAfterForms(t *testing.T) {
	t.Parallel()
	reset := func() string { return time.Now().Add(20 * time.Second).UTC().Format(time.RFC3339) }
	for _, c := range []struct {
		name   string
		api    wire.ModelAPI
		header func(h http.Header)
		body   string
		min    time.Duration
		max    time.Duration
	}{
		{"chat retry-after-ms", openaichat.Model, func(h http.Header) { h.Set("retry-after-ms", "1500") },
			`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, 1500 * time.Millisecond, 1500 * time.Millisecond},
		{"responses retry-after-ms", responses.Model, func(h http.Header) { h.Set("retry-after-ms", "2500") },
			`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, 2500 * time.Millisecond, 2500 * time.Millisecond},
		{"responses x-ratelimit-reset", responses.Model, func(h http.Header) {
			h.Set("x-ratelimit-remaining-requests", "0")
			h.Set("x-ratelimit-reset-requests", "3s")
		}, `{"error":{"message":"Rate limit reached","type":"requests"}}`, 3 * time.Second, 3 * time.Second},
		{"anthropic ratelimit reset", anthropic.Model, func(h http.Header) {
			h.Set("anthropic-ratelimit-requests-remaining", "0")
			h.Set("anthropic-ratelimit-requests-reset", reset())
		}, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}}`, 15 * time.Second, 21 * time.Second},
		{"gemini RetryInfo", gemini.Model, func(http.Header) {},
			`{"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"34.4s"}]}}`, 34400 * time.Millisecond, 34400 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				c.header(w.Header())
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusTooManyRequests)
				w.Write([]byte(c.body))
			}))
			defer srv.Close()
			caller := upstreamtest.Chat{Caller: upstream.New(c.api, "p", srv.URL, "sk-wait-secret", srv.Client(), upstream.Options{})}
			_, err := caller.Complete(context.Background(), body([]string{user("hello")}), nil)
			var le *llm.Error
			if !errors.As(err, &le) || le.Status != http.StatusTooManyRequests {
				t.Fatalf("err = %v; want a 429", err)
			}
			if le.RetryAfter < c.min || le.RetryAfter > c.max {
				t.Errorf("RetryAfter = %v; want %v..%v", le.RetryAfter, c.min, c.max)
			}
		})
	}
}

// The model callers' name of the fleet's web_search tool is the intent rules' name.
func TestWebSearchToolName(t *testing.T) {
	if llm.WebSearchTool != intent.ToolName || !llm.IsWebSearchCall(intent.ToolName) {
		t.Fatalf("llm.WebSearchTool %q, intent.ToolName %q", llm.WebSearchTool, intent.ToolName)
	}
}
