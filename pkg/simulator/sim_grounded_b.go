package simulator

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm"
)

// groundedRoutesB serves the grounded kinds that speak OpenAI-style chat completions
// or Zhipu's search API: glm-chat, glm-api, kimi and openrouter. Each
// answers with pages generated from the query in the shape of its recording (the
// recording itself for "sim:fixture"), and fails in its provider's own error
// envelope, so the adapters' error classification is what gets exercised.
func groundedRoutesB() []engineRoute {
	kimiSearch := fixtures.Read("moonshot/hermoonshotes-round1-tool-calls.response.json")
	kimiFinal := fixtures.Read("moonshot/hermoonshotes-round2-final.response.json")
	orNoSearch := fixtures.Read("openrouter/pydantic-server-tool-web-search-full-params.response.json")
	or429 := fixtures.Read("openrouter/pydantic-error-429-provider-returned-error.json")

	return []engineRoute{
		{
			kind:    "glm-chat",
			pattern: "POST /glm-chat/chat/completions",
			queryOf: chatQuery,
			answer: func(r *http.Request, b []byte, q string) []byte {
				return glmChatBody(glmChatAsk(r, b, q), jstr(decodeBody(b)["model"]), "")
			},
			fixture:   "zhipu/glm-chat-finance-zh.CONSTRUCTED.json",
			empty:     []byte(`{"choices":[{"finish_reason":"stop","index":0,"message":{"content":"（模拟）没有找到相关的搜索结果。","role":"assistant"}}],"created":1748311718,"id":"sim-empty","model":"glm-4.7","request_id":"sim-empty","usage":{"completion_tokens":12,"prompt_tokens":120,"total_tokens":132},"web_search":[]}`),
			errorBody: zhipuErrorBody,
			model:     "glm-4.7",
			options:   `{"searchEngine":"search_pro"}`,
		},
		{
			kind:      "glm-api",
			pattern:   "POST /glm-api/web_search",
			queryOf:   jsonField("search_query"),
			ask:       glmAPIAsk,
			render:    glmAPIBody,
			fixture:   "zhipu/realcase-web-search-api-search-std.response.json",
			empty:     []byte(`{"created":1770732262,"id":"sim-empty","request_id":"sim-empty","search_intent":[{"intent":"SEARCH_NONE","keywords":"","query":""}],"search_result":[]}`),
			errorBody: zhipuErrorBody,
			options:   `{"searchEngine":"search_std"}`,
		},
		{
			// Two turns, as recorded: a $web_search tool call, then (once the request
			// echoes it in a tool message) the final answer.
			kind:    "kimi",
			pattern: "POST /kimi/chat/completions",
			queryOf: chatQuery,
			answer: func(r *http.Request, body []byte, q string) []byte {
				if kimiHasToolMessage(body) {
					return kimiFinalBody(plainAsk(r, body, q), "")
				}
				return kimiSearch
			},
			recorded: func(_ *http.Request, body []byte) []byte {
				if kimiHasToolMessage(body) {
					return kimiFinal
				}
				return kimiSearch
			},
			empty:     []byte(`{"choices":[{"finish_reason":"stop","index":0,"message":{"content":"（模拟）没有找到相关的网页。","role":"assistant"}}],"created":1776522632,"id":"chatcmpl-sim-empty","model":"kimi-k2-turbo-preview","object":"chat.completion","usage":{"completion_tokens":10,"prompt_tokens":180,"total_tokens":190}}`),
			errorBody: moonshotErrorBody,
			model:     "kimi-k2-turbo-preview",
		},
		{
			kind:    "openrouter",
			pattern: "POST /openrouter/chat/completions",
			queryOf: chatQuery,
			ask:     openrouterAsk,
			render:  openrouterBody,
			fixture: "openrouter/pydantic-server-tool-web-search-annotations.response.json",
			// The recorded answer of a model that did not search: no annotations.
			empty: orNoSearch,
			errorBody: func(status int) []byte {
				if status == http.StatusTooManyRequests {
					return or429
				}
				return fmt.Appendf(nil, `{"error":{"code":%d,"message":"simulated OpenRouter failure (HTTP %d)"}}`, status, status)
			},
			model:   "openai/gpt-4.1-mini",
			options: `{"searchContextSize":"medium"}`,
		},
	}
}

// zhipuErrorBody is Zhipu's {"error":{"code","message"}} envelope: the recorded codes
// for a rate limit (1302) and a refused input (1301), a simulated one otherwise.
func zhipuErrorBody(status int) []byte {
	switch status {
	case http.StatusTooManyRequests:
		return []byte(`{"error":{"code":"1302","message":"请求频率超上限"}}`)
	case http.StatusBadRequest:
		return []byte(`{"error":{"code":"1301","message":"系统检测到输入或生成内容可能包含不安全或敏感内容，请您避免输入易产生敏感内容的提示语，感谢您的配合。"}}`)
	}
	return fmt.Appendf(nil, `{"error":{"code":"%d","message":"simulated Zhipu failure (HTTP %d)"}}`, status, status)
}

// moonshotErrorBody is Moonshot's {"error":{"message","type"}} envelope.
func moonshotErrorBody(status int) []byte {
	return fmt.Appendf(nil, `{"error":{"message":"simulated Moonshot failure (HTTP %d)","type":"%s"}}`, status, moonshotErrorType(status))
}

// moonshotErrorType names a status the way OpenAI-compatible providers type their errors.
func moonshotErrorType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_reached_error"
	case status == http.StatusUnauthorized:
		return "invalid_authentication_error"
	case status == http.StatusForbidden:
		return "permission_denied_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// kimiHasToolMessage reports whether a chat request carries a tool result message.
func kimiHasToolMessage(body []byte) bool {
	return slices.ContainsFunc(bodyMessages(body), func(m llm.Message) bool { return m.Role == "tool" })
}
