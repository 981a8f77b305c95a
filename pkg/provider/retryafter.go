package provider

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryAfter is the one rule for how long a provider asked us to wait before trying
// again, read from a refused answer's headers h and body (either may be nil), now
// being when it arrived. The first of these that is present and readable wins:
//
//  1. retry-after-ms: milliseconds, fractions allowed (OpenAI, Azure OpenAI);
//  2. Retry-After: seconds (fractions allowed) or an HTTP date (RFC 9110);
//  3. Google's google.rpc.RetryInfo in the error body: "retryDelay": "34.4s"
//     (Gemini, Vertex AI);
//  4. the rate-limit reset headers of the limits that are used up (their -remaining
//     header is 0, or there is none): Anthropic's anthropic-ratelimit-*-reset (an
//     RFC 3339 time) and OpenAI's x-ratelimit-reset-* (a duration: "1s", "6m0s",
//     "20ms"); the latest of them, since every exhausted limit must have reset;
//  5. X-RateLimit-Reset as Brave sends it: seconds until each window resets, the
//     shortest first ("1, 1419704"): the first (values past a year, such as epoch
//     times other services put there, are not waits and are ignored).
//
// It returns 0 when the provider named no wait (or one in the past).
func RetryAfter(h http.Header, body []byte, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
			return time.Duration(s * float64(time.Second))
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(t.Sub(now), 0)
		}
	}
	if d := retryInfo(body); d > 0 {
		return d
	}
	if d := resetHeaders(h, now); d > 0 {
		return d
	}
	return firstSeconds(h.Get("X-RateLimit-Reset"))
}

// firstSeconds reads the first value of a comma-separated list of seconds; 0 when
// there is none or it is no plausible wait.
func firstSeconds(v string) time.Duration {
	first, _, _ := strings.Cut(v, ",")
	s, err := strconv.ParseFloat(strings.TrimSpace(first), 64)
	if err != nil || s <= 0 || s > 366*24*3600 {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}

// retryInfo reads Google's RetryInfo detail from an error body: {"error": {"details":
// [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "34.4s"}]}}
// (a streamed call's errors may come as a one-element array).
func retryInfo(body []byte) time.Duration {
	if len(body) == 0 || !strings.Contains(string(body), "RetryInfo") {
		return 0
	}
	type envelope struct {
		Error struct {
			Details []struct {
				Type       string `json:"@type"`
				RetryDelay string `json:"retryDelay"`
			} `json:"details"`
		} `json:"error"`
	}
	var one envelope
	if json.Unmarshal(body, &one) != nil {
		var arr []envelope
		if json.Unmarshal(body, &arr) != nil || len(arr) == 0 {
			return 0
		}
		one = arr[0]
	}
	for _, d := range one.Error.Details {
		if strings.HasSuffix(d.Type, "google.rpc.RetryInfo") {
			if dur, err := time.ParseDuration(strings.TrimSpace(d.RetryDelay)); err == nil && dur > 0 {
				return dur
			}
		}
	}
	return 0
}

// resetHeaders reads the latest reset of the used-up rate limits (rule 4 of
// RetryAfter).
func resetHeaders(h http.Header, now time.Time) time.Duration {
	var wait time.Duration
	for name, vs := range h {
		if len(vs) == 0 {
			continue
		}
		lower := strings.ToLower(name)
		v := strings.TrimSpace(vs[0])
		var d time.Duration
		var remaining string
		switch {
		case strings.HasPrefix(lower, "anthropic-ratelimit-") && strings.HasSuffix(lower, "-reset"):
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				continue
			}
			d = t.Sub(now)
			remaining = strings.TrimSuffix(lower, "-reset") + "-remaining"
		case strings.HasPrefix(lower, "x-ratelimit-reset-"):
			var err error
			if d, err = time.ParseDuration(v); err != nil {
				continue
			}
			remaining = "x-ratelimit-remaining-" + strings.TrimPrefix(lower, "x-ratelimit-reset-")
		default:
			continue
		}
		if r := strings.TrimSpace(h.Get(remaining)); r != "" && r != "0" {
			continue // this limit is not the one that refused us
		}
		wait = max(wait, d)
	}
	return wait
}
