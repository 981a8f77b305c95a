package redact_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/redact"
)

// TestJSONErrorNamesNoGoType: every encoding/json failure is worded in JSON's terms.
func TestJSONErrorNamesNoGoType(t *testing.T) {
	type inner struct {
		Role string `json:"role"`
	}
	type body struct {
		Messages []inner `json:"messages"`
		N        int     `json:"n"`
	}
	cases := map[string]string{
		`{"messages":"hi"}`:         `field "messages" must be an array, not a string`,
		`{"messages":[{"role":5}]}`: `field "messages.role" must be a string, not a number`,
		`{"n":1.5}`:                 `field "n" must be an integer, not a number 1.5`,
		`[1]`:                       `expected an object, got an array`,
		`{"messages":`:              `the JSON ends before it is complete`,
		`{"messages":[}`:            `invalid character '}' looking for beginning of value (at byte 14)`,
	}
	for in, want := range cases {
		var b body
		err := json.Unmarshal([]byte(in), &b)
		if err == nil {
			t.Fatalf("%s decoded", in)
		}
		got := redact.JSONError(err)
		if got != want {
			t.Errorf("%s: %q, want %q (from %v)", in, got, want, err)
		}
		for _, leak := range []string{"Go ", "json:", "inner", "body"} {
			if strings.Contains(got, leak) {
				t.Errorf("%s: %q names %q", in, got, leak)
			}
		}
	}
}
