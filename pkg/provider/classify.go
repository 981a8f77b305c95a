package provider

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// Classify is the kind of a provider's non-2xx answer: 429 is RateLimited (Quota when
// the body says the account is out of money: OpenAI's insufficient_quota, Zhipu's
// 1113 余额不足), 402 Quota, 401/403 Auth, 408 and 5xx Unavailable (Anthropic's 529
// overloaded included), any other status BadRequest, but for the 400s that refuse the
// account rather than the request: Google's API_KEY_INVALID ("API key not valid") is
// Auth, Anthropic's "credit balance is too low" Quota.
func Classify(status int, body []byte) Kind {
	switch {
	case status == http.StatusBadRequest && (bytes.Contains(body, []byte("API_KEY_INVALID")) || bytes.Contains(body, []byte("API key not valid"))):
		return Auth
	case status == http.StatusBadRequest && bytes.Contains(body, []byte("credit balance")):
		return Quota
	case status == http.StatusTooManyRequests:
		if QuotaBody(body) {
			return Quota
		}
		return RateLimited
	case status == http.StatusPaymentRequired:
		return Quota
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return Auth
	case status == http.StatusRequestTimeout || status >= 500:
		return Unavailable
	}
	return BadRequest
}

// QuotaBody reports whether a 429 body says the account is out of money rather than
// going too fast (OpenAI insufficient_quota, Zhipu 1113 余额不足).
func QuotaBody(body []byte) bool {
	s := string(body)
	return strings.Contains(s, "insufficient_quota") || strings.Contains(s, `"1113"`) ||
		strings.Contains(s, `"code":1113`) || strings.Contains(s, "余额不足")
}

// ErrorMessage digs the human message out of the error envelopes providers use:
// {"error":{"message"}} (OpenAI, Gemini, Anthropic, OpenRouter, Zhipu),
// {"error":{"detail"}} (Brave), {"detail":{"error"}} or {"detail":"…"} (Tavily),
// {"message"} (Serper), {"error":"…"}; otherwise the body text itself. An error code
// the message does not already name is put before it ("1302: …").
func ErrorMessage(body []byte) string {
	var v map[string]any
	if json.Unmarshal(body, &v) != nil {
		return strings.TrimSpace(string(body))
	}
	pick := func(m map[string]any, keys ...string) string {
		for _, k := range keys {
			switch x := m[k].(type) {
			case string:
				if x != "" {
					return x
				}
			case map[string]any:
				if s := pickString(x, "message", "detail", "error"); s != "" {
					return s
				}
			}
		}
		return ""
	}
	if s := pick(v, "error", "detail", "message"); s != "" {
		e, _ := v["error"].(map[string]any)
		code := pickString(e, "code", "type", "status")
		if code != "" && !strings.Contains(s, code) {
			return code + ": " + s
		}
		return s
	}
	return strings.TrimSpace(string(body))
}

func pickString(m map[string]any, keys ...string) string {
	for _, k := range keys {
		switch x := m[k].(type) {
		case string:
			if x != "" {
				return x
			}
		case float64:
			return strconv.FormatFloat(x, 'f', -1, 64)
		}
	}
	return ""
}
