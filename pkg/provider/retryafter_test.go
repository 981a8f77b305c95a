package provider_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/provider"
)

// Every form of "wait before retrying" a provider uses is read by the one rule, and
// the first present form wins in the documented order.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	retryInfo := `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"34.4s"}]}}`
	for _, c := range []struct {
		name   string
		header http.Header
		body   string
		want   time.Duration
	}{
		{"nothing", nil, "", 0},
		{"Retry-After seconds", h("Retry-After", "7"), "", 7 * time.Second},
		{"Retry-After fractional seconds", h("Retry-After", "1.5"), "", 1500 * time.Millisecond},
		{"Retry-After zero", h("Retry-After", "0"), "", 0},
		{"Retry-After HTTP date", h("Retry-After", now.Add(90*time.Second).Format(http.TimeFormat)), "", 90 * time.Second},
		{"Retry-After date in the past", h("Retry-After", now.Add(-time.Minute).Format(http.TimeFormat)), "", 0},
		{"Retry-After garbage", h("Retry-After", "soon"), "", 0},
		{"retry-after-ms", h("retry-after-ms", "250"), "", 250 * time.Millisecond},
		{"retry-after-ms before Retry-After", h("retry-after-ms", "1500", "Retry-After", "2"), "", 1500 * time.Millisecond},
		{"retry-after-ms unreadable falls to Retry-After", h("retry-after-ms", "x", "Retry-After", "2"), "", 2 * time.Second},
		{"Google RetryInfo", nil, retryInfo, 34400 * time.Millisecond},
		{"Google RetryInfo in a stream's array", nil, "[" + retryInfo + "]", 34400 * time.Millisecond},
		{"Retry-After before RetryInfo", h("Retry-After", "3"), retryInfo, 3 * time.Second},
		{"a body without RetryInfo", nil, `{"error":{"message":"slow down"}}`, 0},
		{"Anthropic reset of the used-up limit", h(
			"anthropic-ratelimit-requests-remaining", "0",
			"anthropic-ratelimit-requests-reset", now.Add(20*time.Second).Format(time.RFC3339),
			"anthropic-ratelimit-tokens-remaining", "5000",
			"anthropic-ratelimit-tokens-reset", now.Add(50*time.Second).Format(time.RFC3339)), "", 20 * time.Second},
		{"Anthropic resets without remaining: the latest", h(
			"anthropic-ratelimit-input-tokens-reset", now.Add(5*time.Second).Format(time.RFC3339),
			"anthropic-ratelimit-output-tokens-reset", now.Add(12*time.Second).Format(time.RFC3339)), "", 12 * time.Second},
		{"OpenAI reset of the used-up limit", h(
			"x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "6m0s",
			"x-ratelimit-remaining-tokens", "1000", "x-ratelimit-reset-tokens", "20ms"), "", 6 * time.Minute},
		{"OpenAI reset in milliseconds", h("x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "750ms"), "", 750 * time.Millisecond},
		{"Retry-After before reset headers", h("Retry-After", "4", "x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "1m"), "", 4 * time.Second},
		{"Brave X-RateLimit-Reset windows", h("X-RateLimit-Reset", "1, 1419704"), "", time.Second},
		{"X-RateLimit-Reset epoch is no wait", h("X-RateLimit-Reset", "1764072000"), "", 0},
		{"reset headers of limits not used up", h("x-ratelimit-remaining-requests", "10", "x-ratelimit-reset-requests", "1m"), "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var body []byte
			if c.body != "" {
				body = []byte(c.body)
			}
			if got := provider.RetryAfter(c.header, body, now); got != c.want {
				t.Errorf("RetryAfter = %v, want %v", got, c.want)
			}
		})
	}
}

// Every status is classified once, for engines and main models alike.
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
		want   provider.Kind
	}{
		{429, `{"error":{"message":"slow down"}}`, provider.RateLimited},
		{429, `{"error":{"code":"insufficient_quota"}}`, provider.Quota},
		{429, `{"error":{"code":"1113","message":"余额不足"}}`, provider.Quota},
		{402, "", provider.Quota},
		{401, "", provider.Auth},
		{403, "", provider.Auth},
		{408, "", provider.Unavailable},
		{500, "", provider.Unavailable},
		{529, "", provider.Unavailable},
		{400, "", provider.BadRequest},
		{400, `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}`, provider.Auth},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}`, provider.Quota},
		{404, "", provider.BadRequest},
	} {
		if got := provider.Classify(c.status, []byte(c.body)); got != c.want {
			t.Errorf("Classify(%d, %s) = %s, want %s", c.status, c.body, got, c.want)
		}
		if got := c.want.Refused(); got != (c.want == provider.RateLimited || c.want == provider.Auth || c.want == provider.Quota) {
			t.Errorf("%s.Refused() = %v", c.want, got)
		}
	}
}

// A secret never survives Redact; too-short values are left alone.
func TestRedact(t *testing.T) {
	got := provider.Redact("key sk-secret-1 and sk-secret-1 again, tok abc", "sk-secret-1", "abc", "")
	if got != "key [REDACTED] and [REDACTED] again, tok abc" {
		t.Errorf("Redact = %q", got)
	}
}
