package ingress_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/ingress"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// paramsAPI is the ingress (model m1, no workers: jobs stay queued) allowing the
// given billable Chat parameters.
func paramsAPI(t *testing.T, billable ...string) http.Handler {
	t.Helper()
	b, _ := bustest.New(t)
	rdb, prefix := testenv.Redis(t)
	store := state.New(rdb, prefix, time.Hour)
	s := ingress.New(ingress.Options{Bus: b, Store: ingress.StoreOf(store), Models: []string{"m1"}, MaxBody: 1 << 20, JobTimeout: time.Minute,
		Log: slog.New(slog.DiscardHandler), ChatBillableParams: billable})
	return s.Handler()
}

// chatWith is a chat request for m1 with extra top-level parameters (JSON).
func chatWith(extra string) string {
	body := `{"model":"m1","messages":[{"role":"user","content":"hi"}]`
	if extra != "" {
		body += "," + extra
	}
	return body + "}"
}

type openAIError struct {
	Error struct {
		Type  string  `json:"type"`
		Code  *string `json:"code"`
		Param *string `json:"param"`
	} `json:"error"`
}

// Chat refuses unknown parameters, values of the wrong type or out of range, and
// billable parameters the operator has not allowed, with 400 in OpenAI's error shape
// naming the parameter, before a job is made; known parameters with valid values,
// the fleet's own extensions and billable parameters at their neutral values pass.
func TestChatParametersValidated(t *testing.T) {
	t.Parallel()
	h := paramsAPI(t)
	refused := []struct{ extra, param, code string }{
		{`"plugins":[{"id":"web"}]`, "plugins", "unknown_parameter"},
		{`"models":["a","b"]`, "models", "unknown_parameter"},
		{`"provider":{"order":["x"]}`, "provider", "unknown_parameter"},
		{`"temperature":"hot"`, "temperature", "invalid_type"},
		{`"temperature":2.5`, "temperature", "invalid_value"},
		{`"top_p":-0.1`, "top_p", "invalid_value"},
		{`"max_tokens":1e30`, "max_tokens", "invalid_value"},
		{`"max_tokens":0`, "max_tokens", "invalid_value"},
		{`"max_completion_tokens":10.5`, "max_completion_tokens", "invalid_type"},
		{`"frequency_penalty":3`, "frequency_penalty", "invalid_value"},
		{`"seed":"42"`, "seed", "invalid_type"},
		{`"logprobs":"yes"`, "logprobs", "invalid_type"},
		{`"top_logprobs":21`, "top_logprobs", "invalid_value"},
		{`"stop":["a","b","c","d","e"]`, "stop", "invalid_value"},
		{`"logit_bias":{"hello":5}`, "logit_bias", "invalid_value"},
		{`"reasoning_effort":"maximal"`, "reasoning_effort", "invalid_value"},
		{`"response_format":{"type":"xml"}`, "response_format.type", "invalid_value"},
		{`"stream_options":{"include_usage":true,"extra":1}`, "stream_options.extra", "unknown_parameter"},
		{`"functions":[{"name":"f"}]`, "functions", "unsupported_parameter"},
		{`"service_tier":"priority"`, "service_tier", "unsupported_parameter"},
		{`"store":true`, "store", "unsupported_parameter"},
		{`"metadata":{"k":"v"}`, "metadata", "unsupported_parameter"},
		{`"audio":{"voice":"alloy","format":"mp3"}`, "audio", "unsupported_parameter"},
		{`"modalities":["text","audio"]`, "modalities", "unsupported_parameter"},
		{`"prediction":{"type":"content","content":"x"}`, "prediction", "unsupported_parameter"},
	}
	for _, c := range refused {
		for _, path := range []string{"/v1/chat/completions", "/v1/jobs"} {
			if path == "/v1/jobs" && c.param == "metadata" {
				continue // the job's own metadata there
			}
			code, _, body := call(t, h, "POST", path, "application/json", strings.NewReader(chatWith(c.extra)))
			var e openAIError
			json.Unmarshal(body, &e)
			if code != 400 || e.Error.Type != "invalid_request_error" || e.Error.Param == nil || *e.Error.Param != c.param || e.Error.Code == nil || *e.Error.Code != c.code {
				t.Errorf("%s %s: %d %s; want 400 param %s code %s", path, c.extra, code, body, c.param, c.code)
			}
		}
	}
	accepted := []string{
		`"temperature":0.7,"top_p":1,"max_tokens":100,"max_completion_tokens":100,"frequency_penalty":-1,"presence_penalty":0.5`,
		`"stop":"END","seed":7,"logprobs":true,"top_logprobs":2,"logit_bias":{"50256":-100},"user":"u1","safety_identifier":"s1"`,
		`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{}}},"tool_choice":"auto","parallel_tool_calls":false`,
		`"reasoning_effort":"low","verbosity":"low","thinking":{"type":"disabled"},"prompt_cache_key":"k"`,
		`"web_search_options":{"search_context_size":"low"},"stream_options":{"include_usage":true}`,
		`"store":false,"service_tier":"default","modalities":["text"],"temperature":null,"audio":null,"n":1`,
	}
	for _, extra := range accepted {
		code, _, body := call(t, h, "POST", "/v1/jobs", "application/json", strings.NewReader(chatWith(extra)))
		if code != 202 {
			t.Errorf("%s: %d %s", extra, code, body)
		}
	}
}

// A billable parameter the operator allows (FLEET_CHAT_BILLABLE_PARAMS) is accepted;
// the others stay refused.
func TestChatBillableParametersAllowed(t *testing.T) {
	t.Parallel()
	h := paramsAPI(t, "store", "service_tier")
	for _, extra := range []string{`"store":true,"metadata":{"k":"v"}`, `"service_tier":"flex"`} {
		if code, _, body := call(t, h, "POST", "/v1/jobs", "application/json", strings.NewReader(chatWith(extra))); code != 202 {
			t.Errorf("allowed %s: %d %s", extra, code, body)
		}
	}
	if code, _, body := call(t, h, "POST", "/v1/jobs", "application/json", strings.NewReader(chatWith(`"audio":{"voice":"alloy","format":"mp3"}`))); code != 400 {
		t.Errorf("audio, not allowed: %d %s", code, body)
	}
}

// openai-go reads each refusal as an *openai.Error with the status, code and the
// parameter named.
func TestChatParametersWithSDK(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(paramsAPI(t))
	defer srv.Close()
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("k"), option.WithMaxRetries(0))
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}
	cases := []struct {
		name        string
		params      openai.ChatCompletionNewParams
		opts        []option.RequestOption
		param, code string
	}{
		{"out of range", openai.ChatCompletionNewParams{Model: "m1", Messages: msgs, Temperature: openai.Float(5)}, nil, "temperature", "invalid_value"},
		{"billable", openai.ChatCompletionNewParams{Model: "m1", Messages: msgs, ServiceTier: openai.ChatCompletionNewParamsServiceTierPriority}, nil, "service_tier", "unsupported_parameter"},
		{"unknown", openai.ChatCompletionNewParams{Model: "m1", Messages: msgs}, []option.RequestOption{option.WithJSONSet("plugins", []any{map[string]any{"id": "web"}})}, "plugins", "unknown_parameter"},
		{"wrong type", openai.ChatCompletionNewParams{Model: "m1", Messages: msgs}, []option.RequestOption{option.WithJSONSet("max_tokens", "many")}, "max_tokens", "invalid_type"},
	}
	for _, c := range cases {
		_, err := client.Chat.Completions.New(t.Context(), c.params, c.opts...)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != c.param || apiErr.Code != c.code || apiErr.Type != "invalid_request_error" {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// A batch line is a Chat request too: its parameters are checked the same way (no
// billable ones in batches), and the line's error names the parameter.
func TestBatchLineParametersValidated(t *testing.T) {
	t.Parallel()
	h := batchAPI(t)
	for _, c := range []struct{ extra, param string }{{`"temperature":"hot"`, "body.temperature"}, {`"plugins":[]`, "body.plugins"}, {`"store":true`, "body.store"}} {
		line := `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":` + chatWith(c.extra) + "}\n"
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		mw.WriteField("purpose", "batch")
		fw, _ := mw.CreateFormFile("file", "in.jsonl")
		fw.Write([]byte(line))
		mw.Close()
		code, _, body := call(t, h, "POST", "/v1/files", mw.FormDataContentType(), &buf)
		if code != 400 || !strings.Contains(string(body), `"param":"`+c.param+`"`) {
			t.Errorf("batch line with %s: %d %s", c.extra, code, body)
		}
	}
}
