package simulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// groundedRoutesA serves the LLM-grounded kinds gemini, openai and anthropic, each
// under its kind's prefix and native path, with an answer grounded on pages generated
// from the query, in the shape of the kind's recording:
//
//   - gemini: POST /gemini/v1beta/models/{model}:generateContent (Developer API) and
//     POST /gemini/v1/projects/{p}/locations/{l}/publishers/google/models/{model}:generateContent
//     (Vertex AI), shaped on the gemini-2.5-pro San Francisco recording (groundingSupports
//     over UTF-8 byte offsets);
//   - openai: POST /openai/v1/responses, shaped on the gpt-5-mini recording (url_citation
//     annotations, code point offsets);
//   - anthropic: POST /anthropic/v1/messages, shaped on the claude-sonnet-4 San Francisco
//     recording (end_turn; the pause_turn pair is left to the engine tests).
//
// "sim:fixture" in the query answers with the recording itself. Errors come in each
// provider's own envelope, so the engines' error parsing is exercised as in production.
func groundedRoutesA() []engineRoute {
	gemini := engineRoute{
		kind:    "gemini",
		queryOf: geminiSimQuery,
		answer: func(r *http.Request, _ []byte, q string) []byte {
			// ServeMux wildcards match whole segments, so the method suffix is checked
			// here; a wrong one gets Google's error envelope (the engine reports it).
			if m := r.PathValue("model"); !strings.HasSuffix(m, ":generateContent") || m == ":generateContent" {
				return []byte(`{"error":{"code":404,"message":"simulator: only {model}:generateContent is served","status":"NOT_FOUND"}}`)
			}
			a := plainAsk(r, nil, q)
			return geminiBody(a, strings.TrimSuffix(r.PathValue("model"), ":generateContent"), a.id(16), "")
		},
		fixture:   "gemini/pydantic-generate-websearch-sf.response.json",
		empty:     []byte(`{"candidates":[{"content":{"parts":[{"text":"(simulated) The search found nothing for this query."}],"role":"model"},"finishReason":"STOP","index":0,"groundingMetadata":{}}],"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":10,"totalTokenCount":22},"modelVersion":"gemini-2.5-flash"}`),
		errorBody: geminiSimError,
		model:     "gemini-2.5-flash",
	}
	vertex := gemini
	gemini.pattern = "POST /gemini/v1beta/models/{model}"
	vertex.pattern = "POST /gemini/v1/projects/{project}/locations/{location}/publishers/google/models/{model}"

	openai := engineRoute{
		kind:    "openai",
		pattern: "POST /openai/v1/responses",
		queryOf: openaiSimQuery,
		answer: func(r *http.Request, b []byte, q string) []byte {
			a := openaiAsk(r, b, q)
			return responsesBody(a, jstr(decodeBody(b)["model"]), a.id(16), "")
		},
		fixture:   "openai/vercel-responses-web-search-gpt5mini.json",
		empty:     []byte(`{"id":"resp_sim_empty","object":"response","status":"completed","error":null,"model":"gpt-5-mini","output":[{"id":"ws_sim","type":"web_search_call","status":"completed","action":{"type":"search","query":"","sources":[]}},{"id":"msg_sim","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"(simulated) The search found nothing for this query."}]}],"usage":{"input_tokens":900,"output_tokens":12,"total_tokens":912}}`),
		errorBody: openaiSimError,
		model:     "gpt-5-mini",
	}

	anthropic := engineRoute{
		kind:    "anthropic",
		pattern: "POST /anthropic/v1/messages",
		queryOf: anthropicSimQuery,
		answer: func(r *http.Request, b []byte, q string) []byte {
			a := anthropicAsk(r, b, q)
			return anthropicBody(a, jstr(decodeBody(b)["model"]), a.id(16), "")
		},
		fixture:   "anthropic/pydantic-web-search-sf.response.json",
		empty:     []byte(`{"id":"msg_sim_empty","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"server_tool_use","id":"srvtoolu_sim","name":"web_search","input":{"query":""}},{"type":"web_search_tool_result","tool_use_id":"srvtoolu_sim","content":[]},{"type":"text","text":"(simulated) The search found nothing for this query."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":2100,"output_tokens":12,"server_tool_use":{"web_search_requests":1}}}`),
		errorBody: anthropicSimError,
		model:     "claude-sonnet-4-5",
	}
	return []engineRoute{gemini, vertex, openai, anthropic}
}

// geminiSimQuery reads the last user text of a generateContent request.
func geminiSimQuery(_ *http.Request, body []byte) string {
	var req geminiRequest
	if json.Unmarshal(body, &req) != nil {
		return ""
	}
	for i := len(req.Contents) - 1; i >= 0; i-- {
		if c := req.Contents[i]; c.Role == "user" || c.Role == "" {
			var b strings.Builder
			for _, p := range c.Parts {
				b.WriteString(p.Text)
			}
			return b.String()
		}
	}
	return ""
}

// openaiSimQuery reads the input of a Responses request (responsesInput).
func openaiSimQuery(_ *http.Request, body []byte) string {
	var req struct {
		Input json.RawMessage `json:"input"`
	}
	json.Unmarshal(body, &req)
	return responsesInput(req.Input)
}

// anthropicSimQuery reads the first user message of a Messages request (string
// content or text blocks); a pause_turn continuation repeats it first.
func anthropicSimQuery(_ *http.Request, body []byte) string {
	for _, m := range bodyMessages(body) {
		if m.Role == "user" {
			return llm.Text(m.Content)
		}
	}
	return ""
}

// geminiSimError is Google's error envelope with the canonical status for code.
func geminiSimError(code int) []byte {
	status := byStatus(code, "UNKNOWN", map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
		404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 502: "UNAVAILABLE", 503: "UNAVAILABLE"})
	return mustJSON(map[string]any{"error": map[string]any{
		"code": code, "message": fmt.Sprintf("simulated Gemini failure (HTTP %d)", code), "status": status}})
}

// openaiSimError is OpenAI's error envelope.
func openaiSimError(code int) []byte {
	e := &wire.Error{Status: code, Message: fmt.Sprintf("simulated OpenAI failure (HTTP %d)", code), Type: "invalid_request_error"}
	switch {
	case code == 429:
		e.Type, e.Code = "requests", "rate_limit_exceeded"
	case code == 401 || code == 403:
		e.Code = "invalid_api_key"
	case code >= 500:
		e.Type, e.Code = "server_error", "server_error"
	}
	return wire.OpenAIError(e)
}

// anthropicSimError is Anthropic's error envelope.
func anthropicSimError(code int) []byte {
	typ := byStatus(code, "api_error", map[int]string{400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
		404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error"})
	return mustJSON(map[string]any{"type": "error", "error": map[string]any{
		"type": typ, "message": fmt.Sprintf("simulated Anthropic failure (HTTP %d)", code)}, "request_id": "req_simulated"})
}

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
			answer: func(_ *http.Request, b []byte, q string) []byte {
				m := decodeBody(b)
				return glmChatBody(glmSearchAsk(jpath(m, "tools", "0", "web_search"), q), jstr(m["model"]), "")
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
			// echoes it in a tool message) the final answer ("sim:fixture": the
			// recorded one).
			kind:    "kimi",
			pattern: "POST /kimi/chat/completions",
			queryOf: chatQuery,
			answer: func(r *http.Request, body []byte, q string) []byte {
				switch {
				case !slices.ContainsFunc(bodyMessages(body), func(m llm.Message) bool { return m.Role == "tool" }):
					return kimiSearch
				case strings.Contains(q, "sim:fixture"):
					return kimiFinal
				}
				return kimiFinalBody(plainAsk(r, body, q), "")
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
