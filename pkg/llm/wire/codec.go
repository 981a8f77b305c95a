package wire

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/llm"
)

// ClientCodec is a protocol as a client speaks it to the fleet.
type ClientCodec interface {
	Protocol() Protocol
	// DecodeRequest reads and validates a request body. Its errors are *Error values
	// with the status and wording of the protocol.
	DecodeRequest(body []byte) (*Request, error)
	// EncodeResponse renders an answer (or a stored answer's current state).
	EncodeResponse(r *Response) ([]byte, error)
	// EncodeError renders an error body (the status is e.Status).
	EncodeError(e *Error) []byte
	// NewStream returns an encoder of one answer's stream events.
	NewStream() Stream
}

// ModelCodec is a protocol as the fleet speaks it to a main model.
type ModelCodec interface {
	Protocol() Protocol
	// EncodeRequest renders a request for the named upstream model (not streaming).
	EncodeRequest(r *Request, model string) ([]byte, error)
	// DecodeResponse reads a model's answer.
	DecodeResponse(body []byte) (*Response, error)
}

// Stream renders one answer as a protocol's server-sent events, as it is produced.
// Start runs as soon as the job is accepted (only the id, model and creation time are
// known). Update runs whenever more of the answer is known while the job runs (the
// model's text so far, the searches started and finished so far: the ingress builds
// it from the job's live stream) and renders only what is new since the last call.
// Finish renders the rest of the final answer: what the client has accumulated from
// every event then equals the non-streamed answer, citations included. Fail ends a
// stream whose job failed. KeepAlive is sent while nothing else is.
//
// The answer passed to Update grows: its Content lists, in order, a server call per
// search started (followed by its result once the search is done), and, once every
// search so far is done, one text part holding the text so far with the citations of
// the "[n]" markers written so far.
// What a stream has sent is never taken back: a text that is not a continuation of
// the text already sent is not sent until Finish, which sends what the final text
// adds to it.
type Stream interface {
	Start(r *Response) []Event
	Update(r *Response) []Event
	KeepAlive() []Event
	Finish(r *Response) []Event
	Fail(r *Response, e *Error) []Event
}

// WriteSSE writes events in server-sent event framing.
func WriteSSE(w interface{ Write([]byte) (int, error) }, evs []Event) {
	var b bytes.Buffer
	for _, e := range evs {
		if e.Name != "" {
			b.WriteString("event: ")
			b.WriteString(e.Name)
			b.WriteByte('\n')
		}
		if e.Data == nil {
			comment := cmp.Or(e.Comment, "keep-alive")
			b.WriteString(": ")
			b.WriteString(comment)
			b.WriteString("\n\n")
			continue
		}
		b.WriteString("data: ")
		b.Write(e.Data)
		b.WriteString("\n\n")
	}
	w.Write(b.Bytes())
}

// Invalid is a 400 about param.
func Invalid(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: fmt.Sprintf(format, args...)}
}

// FromLLM turns an llm.RequestError into an *Error.
func FromLLM(err error) error {
	var re *llm.RequestError
	if errors.As(err, &re) {
		return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: re.Param, Message: re.Message}
	}
	return err
}

// AsError returns err as an *Error (a 500 if it is not one).
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Status: http.StatusInternalServerError, Type: "server_error", Message: err.Error()}
}

// OpenAIError renders the OpenAI error shape.
func OpenAIError(e *Error) []byte {
	typ := cmp.Or(e.Type, ErrorType(openAITypes, e.Status, "server_error"))
	body := map[string]any{"message": e.Message, "type": typ, "param": nil, "code": nil}
	if e.Param != "" {
		body["param"] = e.Param
	}
	if e.Code != "" {
		body["code"] = e.Code
	}
	b, _ := json.Marshal(map[string]any{"error": body})
	return b
}

// openAITypes are OpenAI's error types of HTTP statuses.
var openAITypes = map[int]string{http.StatusUnauthorized: "authentication_error", http.StatusForbidden: "permission_error",
	http.StatusTooManyRequests: "rate_limit_error"}

// ErrorType is a protocol's error type for an HTTP status: the one types gives it,
// else server for a 5xx, else invalid_request_error.
func ErrorType(types map[int]string, status int, server string) string {
	if t, ok := types[status]; ok {
		return t
	}
	if status >= 500 {
		return server
	}
	return "invalid_request_error"
}

// JSONObject decodes a request body into its top-level fields.
func JSONObject(body []byte) (map[string]json.RawMessage, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, Invalid("", "request body is empty; send a JSON object")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, Invalid("", "request body is not valid JSON: %s", redact.JSONError(err))
	}
	if top == nil {
		return nil, Invalid("", "request body must be a JSON object")
	}
	return top, nil
}

// IsNull reports whether v is absent or JSON null.
func IsNull(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) == 0 || string(v) == "null"
}

// Clip clips s to n characters, marking the cut with an ellipsis.
func Clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// IDToken keeps the characters of s that are safe in an id.
func IDToken(s string) string {
	var b strings.Builder
	for _, c := range s {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// AllNotes returns the request's notes and its search settings' ones.
func (r *Request) AllNotes() []string {
	out := append([]string(nil), r.Notes...)
	if r.Search != nil {
		out = append(out, r.Search.Unhonoured...)
	}
	return out
}

// DecodeAs decodes v into dst, or is a 400 saying param must be what.
func DecodeAs(param string, v json.RawMessage, dst any, what string) error {
	if json.Unmarshal(v, dst) != nil {
		return Invalid(param, "'%s' must be %s", param, what)
	}
	return nil
}

// Extension is the fleet's own top-level field of an answer ("searchfleet"): the job,
// and the settings the fleet could not honour. The SDKs ignore it.
func Extension(r *Response) map[string]any {
	if r.JobID == "" && len(r.Notes) == 0 {
		return nil
	}
	ext := map[string]any{"job_id": r.JobID}
	if len(r.Notes) > 0 {
		ext["warnings"] = r.Notes
	}
	return ext
}

// NewText is what a stream that has sent sent is to send of text: what text adds to
// sent when it continues it; when final (the answer), what text has past the longest
// prefix it shares with sent that ends on a character boundary. ok is false when
// there is nothing to send.
func NewText(sent, text string, final bool) (rest string, ok bool) {
	rest, cont := strings.CutPrefix(text, sent)
	if !cont && final {
		n := 0
		for n < len(text) && n < len(sent) && text[n] == sent[n] {
			n++
		}
		for n > 0 && n < len(text) && !utf8.RuneStart(text[n]) {
			n--
		}
		rest = text[n:]
	}
	return rest, rest != "" && (cont || final)
}

// RenderServerPart renders an earlier turn's search for a model that reads it as text.
func RenderServerPart(p Part) string {
	if p.Kind == PartServerCall && p.Server.IsFetch() {
		return fmt.Sprintf("\n[web_fetch %q]\n", p.Server.URL)
	}
	if p.Kind == PartServerCall {
		return fmt.Sprintf("\n[web_search %q]\n", p.Server.Query)
	}
	if p.Search.Error != nil {
		return "[web_search failed: " + p.Search.Error.Code + "]\n"
	}
	var b strings.Builder
	for i, s := range p.Search.Sources {
		fmt.Fprintf(&b, "%d. %s <%s>\n", i+1, s.Title, s.URL)
	}
	return b.String()
}

// ResponsesFormat maps a Chat response_format onto a Responses text.format.
func ResponsesFormat(rf json.RawMessage) map[string]any {
	if IsNull(rf) {
		return nil
	}
	var f struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Strict      *bool           `json:"strict"`
		} `json:"json_schema"`
	}
	if json.Unmarshal(rf, &f) != nil || f.Type == "" || f.Type == "text" {
		return nil
	}
	out := map[string]any{"type": f.Type}
	if s := f.JSONSchema; f.Type == "json_schema" && s != nil {
		out["name"], out["schema"] = s.Name, s.Schema
		if s.Description != "" {
			out["description"] = s.Description
		}
		if s.Strict != nil {
			out["strict"] = *s.Strict
		}
	}
	return out
}

// OpenAIAPI is what the OpenAI protocols' model codecs (Chat and Responses) share:
// a bearer key and the OpenAI error envelope.
type OpenAIAPI struct{}

// Authorize sets the bearer key (none for a local server without one).
func (OpenAIAPI) Authorize(h http.Header, key string) {
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
}

// DecodeError reads the OpenAI error envelope (ErrorEnvelope).
func (OpenAIAPI) DecodeError(status int, body []byte) *llm.Error { return ErrorEnvelope(status, body) }

// ErrorEnvelope reads the error envelope {"error":{"message","type","code"}} of a
// failed call (OpenAI's; Anthropic's has no code), or takes the body as the message.
func ErrorEnvelope(status int, body []byte) *llm.Error {
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		le := StatusError(status, e.Error.Type, e.Error.Message)
		if e.Error.Code != nil {
			le.Code = fmt.Sprint(e.Error.Code)
		}
		return le
	}
	return StatusError(status, "", strings.TrimSpace(string(body)))
}
