package batch

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/research"
)

// Input limits. They follow the OpenAI Batch API's: at most 50,000 requests a batch.
const (
	// MaxLines is the most requests one batch may hold.
	MaxLines = 50_000
	// maxLineBytes bounds one input line (a request with a long conversation fits).
	maxLineBytes = 8 << 20
	// maxReportedErrors bounds the line errors an answer lists; the message still
	// says how many lines are invalid in all.
	maxReportedErrors = 100
	// chatEndpoint and researchEndpoint are the endpoints batches run: every line of
	// a batch names its batch's.
	chatEndpoint     = "/v1/chat/completions"
	researchEndpoint = "/v1/research"
)

// newLineError builds the error of line (0: the input as a whole).
func newLineError(line int, code, param, format string, args ...any) lineError {
	e := lineError{Code: code, Message: fmt.Sprintf(format, args...)}
	if line > 0 {
		e.Line = &line
		e.Message = fmt.Sprintf("line %d: %s", line, e.Message)
	}
	if param != "" {
		e.Param = &param
	}
	return e
}

// Validation is what checking a batch input found.
type Validation struct {
	// Requests counts the request lines (blank lines are skipped).
	Requests int
	// CustomIDs are the lines' custom_ids, in order.
	CustomIDs []string
	// Model is the first line's model; Endpoint the first line's url.
	Model    string
	Endpoint string
	// Errors lists up to maxReportedErrors problems; Invalid counts every invalid line.
	Errors  []lineError
	Invalid int
}

// validator checks input lines one at a time.
type validator struct {
	models []string
	// research checks research lines (nil: the fleet runs none).
	research *research.Service
	seen     map[string]int // custom_id → line
	v        Validation
}

func newValidator(models []string, rs *research.Service) *validator {
	return &validator{models: models, research: rs, seen: map[string]int{}}
}

func (va *validator) fail(e lineError) {
	va.v.Invalid++
	if len(va.v.Errors) < maxReportedErrors {
		va.v.Errors = append(va.v.Errors, e)
	}
}

// inputLine is one request of a batch input file.
type inputLine struct {
	CustomID string          `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

// line checks input line n (1-based). A line with several problems reports the first.
func (va *validator) line(n int, raw []byte) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return // blank lines (a trailing newline) are allowed and skipped
	}
	va.v.Requests++
	if va.v.Requests > MaxLines {
		if va.v.Requests == MaxLines+1 {
			va.fail(newLineError(n, "too_many_requests", "", "the input has more than %d requests, the most a batch may hold", MaxLines))
		}
		return
	}
	l, e := parseLine(n, raw)
	va.v.CustomIDs = append(va.v.CustomIDs, l.CustomID)
	if e == nil {
		e = va.checkRequest(n, l)
	}
	if e == nil && l.CustomID != "" {
		if first, dup := va.seen[l.CustomID]; dup {
			e = ptr(newLineError(n, "duplicate_custom_id", "custom_id", "custom_id %q is used again (first on line %d); each request needs its own", l.CustomID, first))
		} else {
			va.seen[l.CustomID] = n
		}
	}
	if e != nil {
		va.fail(*e)
	}
}

func ptr[T any](v T) *T { return &v }

// parseLine reads the envelope of an input line: {custom_id, method, url, body}.
func parseLine(n int, raw []byte) (inputLine, *lineError) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil {
		msg := "not a JSON object"
		if err != nil {
			msg = "not valid JSON: " + redact.JSONError(err)
		}
		return inputLine{}, ptr(newLineError(n, "invalid_json_line", "", "%s", msg))
	}
	var l inputLine
	str := func(field string, dst *string) *lineError {
		v, ok := top[field]
		if !ok || string(v) == "null" {
			return ptr(newLineError(n, "missing_"+field, field, "'%s' is required", field))
		}
		if json.Unmarshal(v, dst) != nil {
			return ptr(newLineError(n, "invalid_"+field, field, "'%s' must be a string", field))
		}
		return nil
	}
	if e := str("custom_id", &l.CustomID); e != nil {
		return l, e
	}
	if strings.TrimSpace(l.CustomID) == "" {
		return l, ptr(newLineError(n, "missing_custom_id", "custom_id", "'custom_id' must not be empty"))
	}
	if e := str("method", &l.Method); e != nil {
		return l, e
	}
	if e := str("url", &l.URL); e != nil {
		return l, e
	}
	l.Body = top["body"]
	return l, nil
}

// checkRequest checks a line's method, url and body: the body must be a chat request
// the synchronous endpoint would accept, for a model the fleet serves, not streamed.
func (va *validator) checkRequest(n int, l inputLine) *lineError {
	if l.Method != "POST" {
		return ptr(newLineError(n, "invalid_method", "method", "method %q is not supported; use \"POST\"", l.Method))
	}
	if va.v.Endpoint == "" && (l.URL == chatEndpoint || l.URL == researchEndpoint) {
		va.v.Endpoint = l.URL
	}
	if want := cmp.Or(va.v.Endpoint, chatEndpoint); l.URL != want {
		return ptr(newLineError(n, "invalid_url", "url", "url %q does not match the batch's endpoint %q", l.URL, want))
	}
	if len(l.Body) == 0 || string(l.Body) == "null" {
		return ptr(newLineError(n, "missing_body", "body", "'body' is required: the %s request", strings.TrimPrefix(l.URL, "/v1/")))
	}
	if l.URL == researchEndpoint {
		return va.checkResearch(n, l.Body)
	}
	req, err := llm.ParseChatRequest(l.Body)
	if err != nil {
		param := "body"
		if re, ok := errors.AsType[*llm.RequestError](err); ok && re.Param != "" {
			param += "." + re.Param
		}
		return ptr(newLineError(n, "invalid_request", param, "%s", err.Error()))
	}
	if e := openaichat.CheckParams(req.Extra, nil); e != nil { // billable parameters: none in batches
		return ptr(newLineError(n, "invalid_request", "body."+e.Param, "%s", e.Message))
	}
	if req.Stream {
		return ptr(newLineError(n, "invalid_request", "body.stream", "'stream' must be false: batch answers are written to the output file"))
	}
	if !slices.Contains(va.models, req.Model) {
		return ptr(newLineError(n, "model_not_found", "body.model", "the model %q does not exist; available models: %s", redact.Clip(req.Model, 64), strings.Join(va.models, ", ")))
	}
	va.v.Model = cmp.Or(va.v.Model, req.Model)
	return nil
}

// checkResearch checks a research line's body: a research request POST /v1/research
// would accept, run to its end without a client (plan "auto", no callback: the
// batch's own tells its end).
func (va *validator) checkResearch(n int, body json.RawMessage) *lineError {
	if va.research == nil {
		return ptr(newLineError(n, "invalid_url", "url", "research runs are not enabled on this server"))
	}
	var b research.Body
	if err := json.Unmarshal(body, &b); err != nil {
		return ptr(newLineError(n, "invalid_request", "body", "not a research request: %s", redact.JSONError(err)))
	}
	switch {
	case len(b.Callback) > 0 && string(b.Callback) != "null":
		return ptr(newLineError(n, "invalid_request", "body.callback", "a research line has no callback of its own; give the batch one"))
	case b.Plan == "review":
		return ptr(newLineError(n, "invalid_request", "body.plan", `plan "review" waits for a client: a batch line runs with plan "auto"`))
	}
	req, err := b.Request("batch")
	if err == nil {
		err = req.Validate()
	}
	if err != nil {
		param, _, _ := strings.Cut(err.Error(), ":")
		return ptr(newLineError(n, "invalid_request", "body."+param, "%s", err.Error()))
	}
	switch err := va.research.Resolve(req); {
	case errors.Is(err, research.ErrNoAgent):
		return ptr(newLineError(n, "agent_not_found", "body.agent", "the research agent %q does not exist", redact.Clip(req.Agent, 64)))
	case err != nil:
		return ptr(newLineError(n, "model_not_found", "body.model", "the model %q does not exist; research models are \"research/<model>\" of: %s", redact.Clip(req.Model, 64), strings.Join(va.research.Models, ", ")))
	}
	va.v.Model = cmp.Or(va.v.Model, req.Model)
	return nil
}

// result finishes the Validation: an input without requests is an error too.
func (va *validator) result() *Validation {
	if va.v.Requests == 0 && va.v.Invalid == 0 {
		va.fail(newLineError(0, "empty_file", "", "the input has no requests"))
	}
	return &va.v
}

// validate checks every line of r.
func validate(r io.Reader, models []string, rs *research.Service) (*Validation, error) {
	va := newValidator(models, rs)
	if err := eachLine(r, func(n int, line []byte) error { va.line(n, line); return nil }); err != nil {
		return nil, err
	}
	return va.result(), nil
}

// LineTooLongError is an input line over 8 MB: reading the input stopped there.
type LineTooLongError struct{ line int }

func (e LineTooLongError) Error() string {
	return fmt.Sprintf("line %d is longer than %d bytes", e.line, maxLineBytes)
}

// eachLine calls fn with each line of r (1-based number, without its line ending).
// The slice is only valid during the call.
func eachLine(r io.Reader, fn func(n int, line []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var long []byte
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		for errors.Is(err, bufio.ErrBufferFull) {
			if long = append(long, line...); len(long) > maxLineBytes+2 {
				return LineTooLongError{n}
			}
			line, err = br.ReadSlice('\n')
		}
		if long != nil {
			line = append(long, line...)
			long = nil
		}
		if len(bytes.TrimRight(line, "\r\n")) > maxLineBytes {
			return LineTooLongError{n}
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if len(line) > 0 {
			if ferr := fn(n, bytes.TrimRight(line, "\r\n")); ferr != nil {
				return ferr
			}
		}
		if err != nil {
			return nil
		}
	}
}

// InputError is the API's 400 answer to a refused input: the OpenAI error object,
// plus the line errors in the shape of the batch object's errors field.
type InputError struct {
	Error  jobs.ErrorBody `json:"error"`
	Errors ErrorList      `json:"errors"`
}

// AsInputError summarises a failed validation: the message names the first invalid
// lines and how many there are; param is the request field that held the input.
func (v *Validation) AsInputError(param string) InputError {
	const shown = 5
	var parts []string
	for _, e := range v.Errors[:min(shown, len(v.Errors))] {
		parts = append(parts, e.Message)
	}
	msg := fmt.Sprintf("The batch input has %d invalid line(s): %s", v.Invalid, strings.Join(parts, "; "))
	if v.Invalid > shown {
		msg += fmt.Sprintf("; and %d more (see errors.data)", v.Invalid-shown)
	}
	code := "invalid_batch_input"
	if len(v.Errors) == 1 {
		code = v.Errors[0].Code
	}
	return InputError{
		Error:  jobs.ErrorBody{Message: msg, Type: "invalid_request_error", Param: &param, Code: &code},
		Errors: ErrorList{Object: "list", Data: v.Errors},
	}
}
