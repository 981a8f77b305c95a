package batch

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/state"
)

func line(customID, model, content string) string {
	return fmt.Sprintf(`{"custom_id": %q, "method": "POST", "url": "/v1/chat/completions", "body": {"model": %q, "messages": [{"role": "user", "content": %q}]}}`, customID, model, content)
}

// Each kind of bad line is reported with its line number, code and parameter.
func TestValidateLines(t *testing.T) {
	t.Parallel()
	models := []string{"m1", "m2"}
	cases := []struct {
		name  string
		line  string
		code  string
		param string
	}{
		{"not JSON", `{"custom_id": "a",`, "invalid_json_line", ""},
		{"not an object", `[1, 2]`, "invalid_json_line", ""},
		{"no custom_id", `{"method": "POST", "url": "/v1/chat/completions", "body": {}}`, "missing_custom_id", "custom_id"},
		{"empty custom_id", strings.Replace(line("x", "m1", "q"), `"x"`, `"  "`, 1), "missing_custom_id", "custom_id"},
		{"numeric custom_id", strings.Replace(line("x", "m1", "q"), `"x"`, `7`, 1), "invalid_custom_id", "custom_id"},
		{"GET", strings.Replace(line("x", "m1", "q"), `"POST"`, `"GET"`, 1), "invalid_method", "method"},
		{"no url", strings.Replace(line("x", "m1", "q"), `"url": "/v1/chat/completions", `, ``, 1), "missing_url", "url"},
		{"other endpoint", strings.Replace(line("x", "m1", "q"), "/v1/chat/completions", "/v1/responses", 1), "invalid_url", "url"},
		{"no body", `{"custom_id": "x", "method": "POST", "url": "/v1/chat/completions"}`, "missing_body", "body"},
		{"no messages", `{"custom_id": "x", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "m1"}}`, "invalid_request", "body.messages"},
		{"bad role", strings.Replace(line("x", "m1", "q"), `"user"`, `"wizard"`, 1), "invalid_request", "body.messages[0].role"},
		{"stream", strings.Replace(line("x", "m1", "q"), `"body": {`, `"body": {"stream": true, `, 1), "invalid_request", "body.stream"},
		{"unknown model", line("x", "gpt-17", "q"), "model_not_found", "body.model"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			in := line("ok", "m1", "fine") + "\n" + c.line + "\n"
			v, err := validate(strings.NewReader(in), models, nil)
			if err != nil {
				t.Fatal(err)
			}
			if v.Invalid != 1 || len(v.Errors) != 1 {
				t.Fatalf("errors %+v", v.Errors)
			}
			e := v.Errors[0]
			if e.Code != c.code || e.Line == nil || *e.Line != 2 || !strings.HasPrefix(e.Message, "line 2: ") {
				t.Errorf("error %+v (%s), want code %s on line 2", e, e.Message, c.code)
			}
			if got := ""; e.Param != nil {
				got = *e.Param
				if got != c.param {
					t.Errorf("param %q, want %q", got, c.param)
				}
			} else if c.param != "" {
				t.Errorf("no param, want %q", c.param)
			}
		})
	}
}

// A valid input yields its custom_ids in order and its model; blank lines and CRLF
// endings are fine; a duplicate custom_id names the line of the first.
func TestValidateInput(t *testing.T) {
	t.Parallel()
	in := line("a", "m2", "one") + "\r\n\n" + line("b", "m1", "two") + "\n   \n" + line("c", "m1", "three")
	v, err := validate(strings.NewReader(in), []string{"m1", "m2"}, nil)
	if err != nil || v.Invalid != 0 {
		t.Fatalf("%v %+v", err, v.Errors)
	}
	if v.Requests != 3 || !slices.Equal(v.CustomIDs, []string{"a", "b", "c"}) || v.Model != "m2" {
		t.Errorf("validation %+v", v)
	}
	v, _ = validate(strings.NewReader(line("a", "m1", "x")+"\n"+line("b", "m1", "x")+"\n"+line("a", "m1", "y")), []string{"m1"}, nil)
	if v.Invalid != 1 || v.Errors[0].Code != "duplicate_custom_id" || !strings.Contains(v.Errors[0].Message, "first on line 1") || *v.Errors[0].Line != 3 {
		t.Errorf("duplicate: %+v", v.Errors)
	}
	v, _ = validate(strings.NewReader("\n\n"), []string{"m1"}, nil)
	if v.Invalid != 1 || v.Errors[0].Code != "empty_file" || v.Errors[0].Line != nil {
		t.Errorf("empty: %+v", v.Errors)
	}
}

// An input over MaxLines is refused once, at the first line too many; the answer
// lists at most maxReportedErrors errors but counts them all.
func TestValidateLimits(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range MaxLines + 5 {
		b.WriteString(line(fmt.Sprint(i), "m1", "q"))
		b.WriteByte('\n')
	}
	v, err := validate(strings.NewReader(b.String()), []string{"m1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v.Invalid != 1 || v.Errors[0].Code != "too_many_requests" || *v.Errors[0].Line != MaxLines+1 {
		t.Errorf("too many: %+v", v.Errors)
	}
	b.Reset()
	for range 300 {
		b.WriteString("nope\n")
	}
	v, _ = validate(strings.NewReader(b.String()), []string{"m1"}, nil)
	if v.Invalid != 300 || len(v.Errors) != maxReportedErrors {
		t.Errorf("%d invalid, %d listed", v.Invalid, len(v.Errors))
	}
	ie := v.AsInputError("file")
	if !strings.Contains(ie.Error.Message, "300 invalid") || !strings.Contains(ie.Error.Message, "and 295 more") || *ie.Error.Code != "invalid_batch_input" {
		t.Errorf("summary %q", ie.Error.Message)
	}
	long := `{"custom_id": "x", "pad": "` + strings.Repeat("a", maxLineBytes) + `"}`
	_, err = validate(strings.NewReader(line("a", "m1", "q")+"\n"+long), []string{"m1"}, nil)
	var tooLong LineTooLongError
	if !errors.As(err, &tooLong) || tooLong.line != 2 {
		t.Errorf("long line: %v", err)
	}
}

// eachLine hands out lines of any length without their endings, the last one even
// without a final newline.
func TestEachLine(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 200<<10)
	var got []string
	err := eachLine(strings.NewReader("a\r\n"+big+"\n\nlast"), func(n int, l []byte) error {
		got = append(got, fmt.Sprintf("%d:%d", n, len(l)))
		return nil
	})
	if err != nil || !slices.Equal(got, []string{"1:1", fmt.Sprintf("2:%d", len(big)), "3:0", "4:4"}) {
		t.Errorf("%v %v", got, err)
	}
}

// Keys carry the id as a hash tag; job ids map back to their line.
func TestKeysAndJobIDs(t *testing.T) {
	t.Parallel()
	k := state.NewKeys("sf")
	for got, want := range map[string]string{
		k.Batch("batch_x"):      "sf:batch:{batch_x}",
		k.BatchDone("batch_x"):  "sf:batch:{batch_x}:done",
		k.BatchIDs("batch_x"):   "sf:batch:{batch_x}:ids",
		k.BatchLease("batch_x"): "sf:batch:{batch_x}:lease",
		k.TenantBatches("acme"): "sf:batches:{acme}",
		k.File("file-x"):        "sf:file:{file-x}",
		k.TenantFiles("acme"):   "sf:files:{acme}",
		k.ActiveBatches():       "sf:active-batches",
	} {
		if got != want {
			t.Errorf("key %s, want %s", got, want)
		}
	}
	if i, ok := lineOf("batch_x", jobID("batch_x", 1234)); !ok || i != 1234 {
		t.Errorf("lineOf: %d %v", i, ok)
	}
	for _, id := range []string{"batch_y_1", "batch_x_", "batch_x_-1", "batch_x1", "job_abc"} {
		if _, ok := lineOf("batch_x", id); ok {
			t.Errorf("lineOf(%q) accepted", id)
		}
	}
}
