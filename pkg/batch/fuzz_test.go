package batch

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// goNames is what a line error must never contain: Go's words for types.
var goNames = regexp.MustCompile(`Go (struct|value)|cannot unmarshal|json: |\b(batch|llm|json)\.[A-Z]|map\[string\]`)

// FuzzValidate: the batch JSONL parser reads any input without panicking, counts every
// non-blank line as a request, reports each invalid one at most once (and at most
// maxReportedErrors of them), numbers errors with real line numbers, and words them
// without Go type names.
func FuzzValidate(f *testing.F) {
	f.Add([]byte(line("a", "m1", "hi") + "\n" + line("b", "m1", "there") + "\n"))
	f.Add([]byte(line("a", "m1", "hi") + "\r\n" + line("a", "nope", "x") + "\n\n{\n[]\nnull\n" + `{"custom_id":5}` + "\n"))
	f.Add([]byte(`{"custom_id":"x","method":"GET","url":"/v1/embeddings","body":{"model":"m1","messages":"hi"}}`))
	f.Add([]byte(`{"custom_id":"x","method":"POST","url":"/v1/chat/completions","body":{"model":"m1","messages":[{"role":"user","content":"hi"}],"stream":true}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		v, err := validate(bytes.NewReader(in), []string{"m1", "m2"}, nil)
		if err != nil {
			return // only a line over the size limit, which a fuzz input cannot reach
		}
		lines := bytes.Split(in, []byte("\n"))
		nonBlank := 0
		for _, l := range lines {
			if len(bytes.TrimSpace(bytes.TrimRight(l, "\r"))) > 0 {
				nonBlank++
			}
		}
		if v.Requests != nonBlank || len(v.CustomIDs) != v.Requests {
			t.Fatalf("%d requests and %d custom ids for %d non-blank lines", v.Requests, len(v.CustomIDs), nonBlank)
		}
		if v.Requests == 0 {
			// The one whole-input error: nothing to run.
			if v.Invalid != 1 || len(v.Errors) != 1 || v.Errors[0].Code != "empty_file" || v.Errors[0].Line != nil {
				t.Fatalf("an input without requests: %+v", v)
			}
			return
		}
		if v.Invalid > v.Requests || len(v.Errors) > maxReportedErrors || len(v.Errors) > v.Invalid || v.Invalid > 0 && len(v.Errors) == 0 {
			t.Fatalf("%d invalid of %d, %d errors listed", v.Invalid, v.Requests, len(v.Errors))
		}
		for _, e := range v.Errors {
			if e.Line == nil || *e.Line < 1 || *e.Line > len(lines) {
				t.Fatalf("error without a real line number: %+v", e)
			}
			if goNames.MatchString(e.Message) || !strings.HasPrefix(e.Message, "line ") {
				t.Fatalf("error %q", e.Message)
			}
		}
	})
}
