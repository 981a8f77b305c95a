package wire

import (
	"encoding/json"
	"testing"
)

// toolArgsByDecoding is toolArgs as it was: decoding the arguments into a map told
// an object.
func toolArgsByDecoding(args string) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &obj) == nil && obj != nil {
		return json.RawMessage(args)
	}
	if args == "" {
		return json.RawMessage("{}")
	}
	b, _ := json.Marshal(map[string]string{"arguments": args})
	return b
}

// toolArgs tells an object as decoding the arguments into a map told it: valid JSON
// whose value is an object goes as it is, anything else is wrapped, byte for byte as
// before.
func TestToolArgsTellsObjectsAsDecodingDid(t *testing.T) {
	t.Parallel()
	for _, args := range []string{
		``, `{}`, ` {} `, "\n\t{\"a\":1}\r\n", `{"query":"x"}`, `{"a":{"b":[1,2,{"c":null}]}}`, `{"a":1,"a":2}`,
		`null`, ` null`, `[]`, `[{"a":1}]`, `"str"`, `42`, `true`, `{`, `{"a":}`, `{}x`, `{} {}`, `{"a":"\x`,
		"{\"a\":\"\xff\xfe\"}", "\u00a0{}", `{"a":"<b>&</b>"}`, `not json`, `{"a":1}` + "\x00",
	} {
		if got, want := string(ToolArgs(args)), string(toolArgsByDecoding(args)); got != want {
			t.Errorf("toolArgs(%q) = %s, want %s", args, got, want)
		}
	}
}

// FuzzToolArgs checks the same on any text.
func FuzzToolArgs(f *testing.F) {
	for _, s := range []string{``, `{}`, ` {"a":1}`, `null`, `[1]`, `{`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		if got, want := string(ToolArgs(args)), string(toolArgsByDecoding(args)); got != want {
			t.Errorf("toolArgs(%q) = %s, want %s", args, got, want)
		}
	})
}
