package wire_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io/fs"
	"path"
	"sort"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/internal/openresponses"
	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// Schema-validating clients reject a null where the real API sends no field (an
// Anthropic text block's "citations": null, for one). These tests walk every answer and
// stream event the fleet emits on Responses and Messages and hold each null to the
// recorded payloads: a field may be null only where a recording of the same object
// has it null.

// objectID names the kind of a JSON object: its "type" or "object" value, else the key
// it sits under.
func objectID(o map[string]any, parentKey string) string {
	if parentKey == "error" {
		return "key:error" // an error body's type is its class, not its shape
	}
	if t, ok := o["type"].(string); ok {
		return "type:" + t
	}
	if t, ok := o["object"].(string); ok {
		return "object:" + t
	}
	return "key:" + parentKey
}

// nullSet records, per object kind, the fields seen null.
type nullSet map[string]map[string]bool

func (n nullSet) walk(v any, parentKey string, visit func(id, key string)) {
	switch x := v.(type) {
	case map[string]any:
		id := objectID(x, parentKey)
		for k, c := range x {
			if k == "searchfleet" {
				continue // the fleet's own extension
			}
			if c == nil {
				visit(id, k)
				continue
			}
			n.walk(c, k, visit)
		}
	case []any:
		for _, c := range x {
			n.walk(c, parentKey, visit)
		}
	}
}

func (n nullSet) add(v any) {
	n.walk(v, "", func(id, key string) {
		if n[id] == nil {
			n[id] = map[string]bool{}
		}
		n[id][key] = true
	})
}

// jsonValues reads a fixture: one JSON document, JSON lines, or server-sent events.
func jsonValues(t *testing.T, name string) []any {
	b := fixtures.Read(name)
	var out []any
	var one any
	if json.Unmarshal(b, &one) == nil {
		return []any{one}
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		line = strings.TrimSpace(strings.TrimPrefix(line, "data:"))
		if line == "" || !strings.HasPrefix(line, "{") {
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, v)
	}
	return out
}

// recordedNulls collects the nulls of the recorded answers and events matching globs.
func recordedNulls(t *testing.T, globs ...string) nullSet {
	n := nullSet{}
	files := 0
	for _, g := range globs {
		names, _ := fs.Glob(fixtures.FS(), g)
		for _, name := range names {
			if strings.HasSuffix(name, ".request.json") || strings.Contains(path.Base(name), "request-messages") {
				continue
			}
			files++
			for _, v := range jsonValues(t, name) {
				n.add(v)
			}
		}
	}
	if files == 0 {
		t.Fatalf("no fixtures for %v", globs)
	}
	return n
}

// emitted is every answer and stream event a codec renders for the answers of
// responseStates and the growing stream, with and without echoed settings.
func emitted(t *testing.T, codec wire.ClientCodec) []any {
	var out []any
	add := func(b []byte) {
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	for _, echo := range []map[string]json.RawMessage{nil, responses.Echo([]byte(conformanceRequest))} {
		for _, r := range responseStates() {
			r.Echo = echo
			b, err := codec.EncodeResponse(r)
			if err != nil {
				t.Fatal(err)
			}
			add(b)
		}
		for _, text := range append([]string{"Paris is sunny [1][2] today."}, liveTexts...) {
			stages, final := growing(text)
			for _, end := range []string{"finish", "fail"} {
				st := codec.NewStream()
				evs := st.Start(stages[0])
				for _, s := range stages {
					evs = append(evs, st.Update(s)...)
				}
				if end == "fail" {
					evs = append(evs, st.Fail(stages[0], &wire.Error{Status: 502, Message: "the model's provider failed"})...)
				} else {
					final.Echo = echo
					evs = append(evs, st.Finish(final)...)
				}
				for _, e := range evs {
					if e.Data != nil {
						add(e.Data)
					}
				}
			}
		}
		add(codec.EncodeError(&wire.Error{Status: 400, Message: "bad"}))
	}
	return out
}

func checkNulls(t *testing.T, codec wire.ClientCodec, recorded nullSet, allowed func(id, key string) bool) {
	bad := map[string]bool{}
	for _, v := range emitted(t, codec) {
		recorded.walk(v, "", func(id, key string) {
			if !recorded[id][key] && !allowed(id, key) {
				bad[id+" ."+key] = true
			}
		})
	}
	var list []string
	for k := range bad {
		list = append(list, k)
	}
	sort.Strings(list)
	for _, k := range list {
		t.Errorf("%s: null, where no recorded payload has it null (omit the field)", k)
	}
}

func TestAnthropicEmitsNoNullTheAPIOmits(t *testing.T) {
	t.Parallel()
	recorded := recordedNulls(t, "anthropic/*.json", "anthropic/*.sse", "anthropic/*.jsonl")
	checkNulls(t, anthropic.Client, recorded, func(id, key string) bool { return false })
}

func TestResponsesEmitsNoNullTheAPIOmits(t *testing.T) {
	t.Parallel()
	recorded := recordedNulls(t, "openai/pydantic-responses-*.json", "openai/pydantic-responses-*.sse", "openai/vercel-*responses*.json",
		"openai/vercel-*responses*.jsonl", "openai/vercel-error-*.json")
	checkNulls(t, responses.Client, recorded, func(id, key string) bool {
		switch id {
		case "object:response":
			// The Open Responses specification requires these fields, null when unset.
			return openresponses.Fits(nil, openresponses.ResponseResourceFields[key])
		case "type:function":
			// So it does a function tool's description, parameters and strict.
			return openresponses.Fits(nil, openresponses.Nested["tool.function"][key])
		case "type:json_schema":
			// And a json_schema text format's description.
			return key == "description"
		case "key:error":
			// OpenAI's error object always has param and code (the SDKs read both).
			return key == "param" || key == "code"
		}
		return false
	})
}
