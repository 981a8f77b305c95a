package simulator

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// geminiRequest is the part of a generateContent request the simulator reads.
type geminiRequest struct {
	Contents []struct {
		Role  string `json:"role"`
		Parts []struct {
			Text             string `json:"text"`
			ThoughtSignature string `json:"thoughtSignature"`
			FunctionCall     *struct {
				ID   string          `json:"id"`
				Name string          `json:"name"`
				Args json.RawMessage `json:"args"`
			} `json:"functionCall"`
			FunctionResponse *struct {
				ID       string          `json:"id"`
				Name     string          `json:"name"`
				Response json.RawMessage `json:"response"`
			} `json:"functionResponse"`
		} `json:"parts"`
	} `json:"contents"`
	Tools []struct {
		GoogleSearch         json.RawMessage `json:"googleSearch"`
		GoogleSearchSnake    json.RawMessage `json:"google_search"`
		FunctionDeclarations []struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	ToolConfig struct {
		FunctionCallingConfig struct {
			Mode                 string   `json:"mode"`
			AllowedFunctionNames []string `json:"allowedFunctionNames"`
		} `json:"functionCallingConfig"`
	} `json:"toolConfig"`
}

// geminiErrorBody is the google.rpc error shape of the recorded 429s, with the status
// name of the HTTP status: a 429 carries a RetryInfo of one second.
func geminiErrorBody(status int, msg string) []byte {
	e := map[string]any{"code": status, "message": msg, "status": byStatus(status, "INTERNAL", map[int]string{429: "RESOURCE_EXHAUSTED",
		503: "UNAVAILABLE", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 400: "INVALID_ARGUMENT"})}
	if status == http.StatusTooManyRequests {
		e["details"] = []any{map[string]string{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"}}
	}
	return mustJSON(map[string]any{"error": e})
}

// geminiGenerate is the scripted model as the Gemini API (POST
// /v1beta/models/{model}:generateContent, :streamGenerateContent?alt=sse;
// x-goog-api-key or a bearer access token required): functionCall parts without ids (as the recorded answers
// have none), STOP, usageMetadata, and streamed chunks of text in CRLF-framed SSE.
func (s *Server) geminiGenerate(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	model, method, _ := strings.Cut(r.PathValue("call"), ":")
	if method != "generateContent" && method != "streamGenerateContent" {
		writeError(w, http.StatusNotFound, geminiErrorBody(http.StatusNotFound, "simulator: method "+method+" is not served"))
		return
	}
	if r.Header.Get("x-goog-api-key") == "" && !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		// An OAuth access token (Vertex AI) comes as a bearer token instead.
		writeError(w, http.StatusUnauthorized, geminiErrorBody(http.StatusUnauthorized, "simulator: the x-goog-api-key header (or a bearer access token) is required"))
		return
	}
	var req geminiRequest
	if err := json.Unmarshal(body, &req); err != nil || len(req.Contents) == 0 {
		writeError(w, http.StatusBadRequest, geminiErrorBody(http.StatusBadRequest, "simulator: contents is required"))
		return
	}
	a, ok := s.play(w, r, body, req.chatForm(model), func(status int) []byte { return geminiErrorBody(status, "simulated model failure") })
	if !ok {
		return
	}
	if req.searches() && req.Contents[len(req.Contents)-1].Role != "model" && wantsSearch(a.user) && len(a.calls) == 0 {
		// Grounding with Google Search: one query, a grounding chunk per page and a
		// support per cited sentence (UTF-8 byte offsets); streamed, the grounding
		// metadata comes on the last chunk.
		s.nativeSearch(w, r, method == "streamGenerateContent", a.user, a.id, "gemini/pydantic-stream-websearch-sf.sse",
			func() []byte { return geminiRecorded(model, a.id) },
			func() []byte { return geminiBody(newAsk(a.user, 0, nil, nil, ""), model, a.id, simulatedPrefix) }, geminiStream)
		return
	}
	usage := map[string]int{"promptTokenCount": a.usage.InputTokens, "candidatesTokenCount": a.usage.OutputTokens, "totalTokenCount": a.usage.InputTokens + a.usage.OutputTokens}
	answer := func(parts []any, finish string) []byte {
		c := map[string]any{"content": map[string]any{"parts": parts, "role": "model"}, "index": 0}
		if finish != "" {
			c["finishReason"] = finish
		}
		return mustJSON(map[string]any{"candidates": []any{c}, "usageMetadata": usage, "modelVersion": model, "responseId": "sim-" + a.id})
	}
	thinking, include := geminiThinking(body)
	if thinking && !s.reasoningPasses(w, string(body), body, geminiSignatureError, func(e *wire.Error) []byte { return geminiErrorBody(e.Status, e.Message) }) {
		return
	}
	var calls []any
	for i, c := range a.calls {
		var args any = json.RawMessage(c.Function.Arguments)
		if !json.Valid([]byte(c.Function.Arguments)) {
			args = map[string]string{"arguments": c.Function.Arguments}
		}
		part := map[string]any{"functionCall": map[string]any{"name": c.Function.Name, "args": args}}
		if thinking && i == 0 {
			part["thoughtSignature"] = geminiCallSignature(c.Function.Name, mustJSON(args))
		}
		calls = append(calls, part)
	}
	var thought []any
	if include {
		// A thought summary, as Gemini gives one with includeThoughts: a part of its
		// own, marked thought, before the answer's parts.
		thought = []any{map[string]any{"text": "**Reading the question**\n\nThe user asks: " + a.user, "thought": true}}
	}
	if method == "generateContent" {
		parts := thought
		if a.text != "" {
			parts = append(parts, map[string]string{"text": a.text})
		}
		writeJSON(w, answer(append(parts, calls...), "STOP"))
		return
	}
	var evs []wire.Event
	if thought != nil {
		evs = append(evs, wire.Event{Data: answer(thought, "")})
	}
	for _, tok := range tokens(a.text) {
		evs = append(evs, wire.Event{Data: answer([]any{map[string]string{"text": tok}}, "")})
	}
	if len(calls) == 0 {
		calls = []any{map[string]string{"text": ""}}
	}
	evs = append(evs, wire.Event{Data: answer(calls, "STOP")})
	writeEvents(w, r, evs, tokenDelay(a.user))
}

// searches reports whether the request declared grounding with Google Search.
func (req *geminiRequest) searches() bool {
	for _, t := range req.Tools {
		if t.GoogleSearch != nil || t.GoogleSearchSnake != nil {
			return true
		}
	}
	return false
}

// geminiRecorded is the recorded grounded answer (gemini-2.5-pro on Mexico City),
// its text marked as simulated and its segments moved to match.
func geminiRecorded(model, id string) []byte {
	resp := decodeBody(fixtures.Read("gemini/pydantic-generate-websearch-mexico-2.response.json"))
	resp["responseId"], resp["modelVersion"] = "sim-"+id, model
	c := resp["candidates"].([]any)[0].(map[string]any)
	part := c["content"].(map[string]any)["parts"].([]any)[0].(map[string]any)
	part["text"] = simulatedPrefix + part["text"].(string)
	shift := float64(len(simulatedPrefix)) // segments count UTF-8 bytes
	for _, sp := range c["groundingMetadata"].(map[string]any)["groundingSupports"].([]any) {
		seg := sp.(map[string]any)["segment"].(map[string]any)
		start, _ := seg["startIndex"].(float64) // absent when 0
		seg["startIndex"], seg["endIndex"] = start+shift, seg["endIndex"].(float64)+shift
	}
	return mustJSON(resp)
}

// chatForm renders the request in the Chat form the script reads: model turns as
// assistant messages with tool calls, functionResponse parts as tool messages.
func (req *geminiRequest) chatForm(model string) chatRequest {
	out := chatRequest{Model: model}
	for i, c := range req.Contents {
		var text []string
		var calls []llm.ToolCall
		for j, p := range c.Parts {
			switch {
			case p.FunctionCall != nil:
				tc := llm.ToolCall{ID: cmp.Or(p.FunctionCall.ID, fmt.Sprintf("call_%d_%d", i, j)), Type: "function"}
				tc.Function.Name, tc.Function.Arguments = p.FunctionCall.Name, string(p.FunctionCall.Args)
				calls = append(calls, tc)
			case p.FunctionResponse != nil:
				var res map[string]json.RawMessage
				json.Unmarshal(p.FunctionResponse.Response, &res)
				content := string(p.FunctionResponse.Response)
				for _, k := range []string{"result", "output", "content", "error"} {
					var s string
					if json.Unmarshal(res[k], &s) == nil && s != "" {
						content = s
						break
					}
				}
				out.Messages = append(out.Messages, llm.Message{Role: "tool", ToolCallID: p.FunctionResponse.ID + p.FunctionResponse.Name, Content: mustJSON(content)})
			case p.Text != "":
				text = append(text, p.Text)
			}
		}
		if len(text) == 0 && len(calls) == 0 {
			continue
		}
		role := "user"
		if c.Role == "model" {
			role = "assistant"
		}
		m := llm.Message{Role: role, ToolCalls: calls}
		if len(text) > 0 {
			m.Content, _ = json.Marshal(strings.Join(text, ""))
		}
		out.Messages = append(out.Messages, m)
	}
	for _, t := range req.Tools {
		for _, d := range t.FunctionDeclarations {
			var tool chatTool
			tool.Type, tool.Function.Name, tool.Function.Parameters = "function", d.Name, d.Parameters
			out.Tools = append(out.Tools, tool)
		}
	}
	// toolConfig in the Chat form: ANY naming one function forces it, ANY alone
	// requires a call, NONE forbids one.
	switch cfg := req.ToolConfig.FunctionCallingConfig; {
	case cfg.Mode == "ANY" && len(cfg.AllowedFunctionNames) == 1:
		out.ToolChoice, _ = json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": cfg.AllowedFunctionNames[0]}})
	case cfg.Mode == "ANY":
		out.ToolChoice = json.RawMessage(`"required"`)
	case cfg.Mode == "NONE":
		out.ToolChoice = json.RawMessage(`"none"`)
	}
	return out
}
