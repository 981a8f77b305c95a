package openaichat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// Chat request parameters (OpenAI Chat Completions, POST /v1/chat/completions). The
// fleet forwards a Chat request's parameters to the model on the operator's key, so
// it accepts only the parameters it knows, with their types and ranges, as Responses
// and Messages do. model, messages, tools, stream, n and web_search_options are read
// (and checked) by llm.ParseChatRequest; CheckChatParams checks the rest.

// Billable parameters change what the provider bills, so a client may use them only
// where the operator allows them (FLEET_CHAT_BILLABLE_PARAMS); their neutral values
// (store: false, modalities: ["text"], service_tier: "default", null) are always
// accepted.
const (
	// ParamServiceTier allows service_tier values other than "default" (flex,
	// priority, scale, auto: a different price).
	ParamServiceTier = "service_tier"
	// ParamAudio allows audio output: audio, and "audio" in modalities.
	ParamAudio = "audio"
	// ParamStore allows stored completions: store: true, and metadata.
	ParamStore = "store"
	// ParamPrediction allows predicted outputs (prediction: rejected prediction
	// tokens are billed as completion tokens).
	ParamPrediction = "prediction"
)

// BillableParams are the names FLEET_CHAT_BILLABLE_PARAMS accepts.
var BillableParams = []string{ParamServiceTier, ParamAudio, ParamStore, ParamPrediction}

// MaxTokens bounds max_tokens and max_completion_tokens: no model writes more in
// one answer, and a larger value is a mistake or a probe.
const MaxTokens = 1_000_000

// chatParamChecks are the Chat parameters the fleet accepts besides those
// llm.ParseChatRequest reads, each with its check (value is never JSON null: null
// means the default and is accepted for every parameter). reasoning_effort,
// verbosity and thinking (GLM, Kimi, DeepSeek) are forwarded to models that read them.
var chatParamChecks = map[string]func(p string, v json.RawMessage) *wire.Error{
	"temperature":            number(0, 2),
	"top_p":                  number(0, 1),
	"frequency_penalty":      number(-2, 2),
	"presence_penalty":       number(-2, 2),
	"max_tokens":             integer(1, MaxTokens),
	"max_completion_tokens":  integer(1, MaxTokens),
	"top_logprobs":           integer(0, 20),
	"seed":                   integer(math.MinInt64, math.MaxInt64),
	"logprobs":               boolean,
	"parallel_tool_calls":    boolean,
	"logit_bias":             logitBias,
	"stop":                   stop,
	"response_format":        responseFormat,
	"tool_choice":            toolChoice,
	"stream_options":         streamOptions,
	"user":                   text(512),
	"safety_identifier":      text(64),
	"prompt_cache_key":       text(512),
	"prompt_cache_retention": oneOf("in_memory", "24h"),
	"reasoning_effort":       oneOf("none", "minimal", "low", "medium", "high", "xhigh"),
	"verbosity":              oneOf("low", "medium", "high"),
	"thinking":               thinking,
	// Billable: checked here, allowed by CheckChatParams.
	"service_tier": oneOf("auto", "default", "flex", "scale", "priority"),
	"audio":        object,
	"modalities":   modalities,
	"store":        boolean,
	"metadata":     metadata,
	"prediction":   object,
}

// refusedChatParams are parameters of the Chat API (or of a gateway) the fleet does
// not serve, with what to use instead.
var refusedChatParams = map[string]string{
	"functions":     "'functions' is not supported; declare function tools in 'tools'.",
	"function_call": "'function_call' is not supported; use 'tool_choice'.",
}

// billable says which allowance a billable parameter's value needs ("" for a neutral
// value, or a parameter that is not billable).
func billable(name string, v json.RawMessage) string {
	switch name {
	case "service_tier":
		if string(v) != `"default"` {
			return ParamServiceTier
		}
	case "audio", "prediction":
		return name
	case "modalities":
		var m []string
		if json.Unmarshal(v, &m) == nil && slices.Contains(m, "audio") {
			return ParamAudio
		}
	case "store":
		if string(v) == "true" {
			return ParamStore
		}
	case "metadata":
		return ParamStore
	}
	return ""
}

// CheckParams checks a Chat request's parameters (llm.ChatRequest.Extra): an
// unknown parameter, a value of the wrong type or out of range, or a billable one the
// operator has not allowed is a 400 naming the parameter, in OpenAI's error shape.
func CheckParams(params map[string]json.RawMessage, allowed []string) *wire.Error {
	for _, name := range slices.Sorted(maps.Keys(params)) {
		v := bytes.TrimSpace(params[name])
		if msg, ok := refusedChatParams[name]; ok {
			return &wire.Error{Status: 400, Type: "invalid_request_error", Code: "unsupported_parameter", Param: name, Message: msg}
		}
		check, ok := chatParamChecks[name]
		if !ok {
			return &wire.Error{Status: 400, Type: "invalid_request_error", Code: "unknown_parameter", Param: name,
				Message: fmt.Sprintf("Unrecognized request argument supplied: %s", clipName(name))}
		}
		if wire.IsNull(v) {
			continue
		}
		if e := check(name, v); e != nil {
			return e
		}
		if need := billable(name, v); need != "" && !slices.Contains(allowed, need) {
			return &wire.Error{Status: 400, Type: "invalid_request_error", Code: "unsupported_parameter", Param: name,
				Message: fmt.Sprintf("'%s' is not enabled on this server: it changes what the model provider bills, and the operator has not allowed it.", name)}
		}
	}
	return nil
}

// clipName keeps an unknown parameter's name short in the message.
func clipName(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

func invalidType(p, want string) *wire.Error {
	return &wire.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_type", Param: p,
		Message: fmt.Sprintf("Invalid type for '%s': expected %s.", p, want)}
}

func invalidValue(p, format string, args ...any) *wire.Error {
	return &wire.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_value", Param: p,
		Message: fmt.Sprintf("Invalid '%s': ", p) + fmt.Sprintf(format, args...)}
}

// number accepts a JSON number in [lo, hi].
func number(lo, hi float64) func(string, json.RawMessage) *wire.Error {
	return func(p string, v json.RawMessage) *wire.Error {
		var f float64
		if len(v) == 0 || v[0] == '"' || json.Unmarshal(v, &f) != nil {
			return invalidType(p, "a number")
		}
		if f < lo || f > hi {
			return invalidValue(p, "expected a number from %g to %g, got %s.", lo, hi, v)
		}
		return nil
	}
}

// integer accepts a JSON integer in [lo, hi].
func integer(lo, hi int64) func(string, json.RawMessage) *wire.Error {
	return func(p string, v json.RawMessage) *wire.Error {
		var f float64
		if len(v) == 0 || v[0] == '"' || json.Unmarshal(v, &f) != nil || f != math.Trunc(f) {
			return invalidType(p, "an integer")
		}
		if f < float64(lo) || f > float64(hi) {
			return invalidValue(p, "expected an integer from %d to %d, got %s.", lo, hi, clipName(string(v)))
		}
		return nil
	}
}

func boolean(p string, v json.RawMessage) *wire.Error {
	if string(v) != "true" && string(v) != "false" {
		return invalidType(p, "a boolean")
	}
	return nil
}

func object(p string, v json.RawMessage) *wire.Error {
	var o map[string]json.RawMessage
	if json.Unmarshal(v, &o) != nil || o == nil {
		return invalidType(p, "an object")
	}
	return nil
}

// text accepts a string of at most max bytes.
func text(max int) func(string, json.RawMessage) *wire.Error {
	return func(p string, v json.RawMessage) *wire.Error {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return invalidType(p, "a string")
		}
		if len(s) > max {
			return invalidValue(p, "expected at most %d characters, got %d.", max, len(s))
		}
		return nil
	}
}

// oneOf accepts one of the given strings.
func oneOf(values ...string) func(string, json.RawMessage) *wire.Error {
	return func(p string, v json.RawMessage) *wire.Error {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return invalidType(p, "a string")
		}
		if !slices.Contains(values, s) {
			return invalidValue(p, "expected one of %s, got %q.", strings.Join(values, ", "), clipName(s))
		}
		return nil
	}
}

func logitBias(p string, v json.RawMessage) *wire.Error {
	var m map[string]json.RawMessage
	if json.Unmarshal(v, &m) != nil || m == nil {
		return invalidType(p, "an object mapping token ids to numbers")
	}
	if len(m) > 1024 {
		return invalidValue(p, "expected at most 1024 tokens, got %d.", len(m))
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if k == "" || strings.Trim(k, "0123456789") != "" {
			return invalidValue(p, "keys must be token ids (integers), got %q.", clipName(k))
		}
		if e := number(-100, 100)(p+"."+k, m[k]); e != nil {
			return e
		}
	}
	return nil
}

// stop accepts a string or up to 4 strings.
func stop(p string, v json.RawMessage) *wire.Error {
	var one string
	if json.Unmarshal(v, &one) == nil {
		return nil
	}
	var many []string
	if json.Unmarshal(v, &many) != nil {
		return invalidType(p, "a string or an array of strings")
	}
	if len(many) > 4 {
		return invalidValue(p, "expected at most 4 sequences, got %d.", len(many))
	}
	return nil
}

func responseFormat(p string, v json.RawMessage) *wire.Error {
	var f struct {
		Type       string          `json:"type"`
		JSONSchema json.RawMessage `json:"json_schema"`
	}
	if object(p, v) != nil || json.Unmarshal(v, &f) != nil {
		return invalidType(p, "an object")
	}
	switch f.Type {
	case "text", "json_object":
	case "json_schema":
		if object(p+".json_schema", f.JSONSchema) != nil {
			return invalidValue(p, "type json_schema needs a 'json_schema' object.")
		}
	default:
		return invalidValue(p+".type", "expected one of text, json_object, json_schema, got %q.", clipName(f.Type))
	}
	return nil
}

func toolChoice(p string, v json.RawMessage) *wire.Error {
	var mode string
	if json.Unmarshal(v, &mode) == nil {
		return oneOf("none", "auto", "required")(p, v)
	}
	var o struct {
		Type     string `json:"type"`
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
		AllowedTools json.RawMessage `json:"allowed_tools"`
	}
	if object(p, v) != nil || json.Unmarshal(v, &o) != nil {
		return invalidType(p, `a string or an object {"type":"function","function":{"name":…}}`)
	}
	switch {
	case o.Type == "function" && o.Function != nil && o.Function.Name != "":
	case o.Type == "allowed_tools" && object(p, o.AllowedTools) == nil:
	default:
		return invalidValue(p, `expected "none", "auto", "required" or {"type":"function","function":{"name":…}}.`)
	}
	return nil
}

func streamOptions(p string, v json.RawMessage) *wire.Error {
	var o map[string]json.RawMessage
	if json.Unmarshal(v, &o) != nil || o == nil {
		return invalidType(p, "an object")
	}
	for _, k := range slices.Sorted(maps.Keys(o)) {
		switch k {
		case "include_usage", "include_obfuscation":
			if !wire.IsNull(o[k]) {
				if e := boolean(p+"."+k, o[k]); e != nil {
					return e
				}
			}
		default:
			return &wire.Error{Status: 400, Type: "invalid_request_error", Code: "unknown_parameter", Param: p + "." + k,
				Message: fmt.Sprintf("Unrecognized request argument supplied: %s.%s", p, clipName(k))}
		}
	}
	return nil
}

func modalities(p string, v json.RawMessage) *wire.Error {
	var m []string
	if json.Unmarshal(v, &m) != nil {
		return invalidType(p, "an array of strings")
	}
	for _, s := range m {
		if s != "text" && s != "audio" {
			return invalidValue(p, "expected text or audio, got %q.", clipName(s))
		}
	}
	return nil
}

// metadata accepts up to 16 string values (keys up to 64 characters, values up to 512).
func metadata(p string, v json.RawMessage) *wire.Error {
	var m map[string]string
	if json.Unmarshal(v, &m) != nil || m == nil {
		return invalidType(p, "an object of strings")
	}
	if len(m) > 16 {
		return invalidValue(p, "expected at most 16 keys, got %d.", len(m))
	}
	for k, s := range m {
		if len(k) > 64 || len(s) > 512 {
			return invalidValue(p, "keys are at most 64 characters and values at most 512.")
		}
	}
	return nil
}

// thinking is the GLM / Kimi / DeepSeek switch: {"type": "enabled" | "disabled" | …}.
func thinking(p string, v json.RawMessage) *wire.Error {
	var t struct {
		Type string `json:"type"`
	}
	if object(p, v) != nil || json.Unmarshal(v, &t) != nil || t.Type == "" {
		return invalidType(p, `an object {"type": "enabled" | "disabled"}`)
	}
	return nil
}
