package wire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"regexp"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// goNames is what a client-visible error must never contain: Go's words for types.
var goNames = regexp.MustCompile(`Go (struct|value)|cannot unmarshal|json: |\b(wire|llm|json)\.[A-Z]|map\[string\]`)

// seedGlob adds every fixture matching glob to f.
func seedGlob(f *testing.F, globs ...string) {
	for _, g := range globs {
		names, err := fs.Glob(fixtures.FS(), g)
		if err != nil || len(names) == 0 {
			f.Fatalf("no fixtures match %s: %v", g, err)
		}
		for _, n := range names {
			f.Add(fixtures.Read(n))
		}
	}
}

// FuzzDecodeRequest: every protocol's request decoder answers any body with a request
// or a 400 in its own words (no Go type names) whose error body is valid JSON, never a
// panic; a decoded request names its model and renders as a Chat request the chat
// endpoint accepts.
func FuzzDecodeRequest(f *testing.F) {
	seedGlob(f, "anthropic/*.request.json", "openai/*.request.json", "openrouter/*.request.json", "zhipu/*.request.json")
	for _, s := range []string{``, `null`, `[]`, `{}`, `{"model":5}`, `{"model":"m","messages":"x"}`, `{"model":"m","input":[5]}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image"}]}]}`, `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search","max_uses":-1}]}`} {
		f.Add([]byte(s))
	}
	codecs := []wire.ClientCodec{openaichat.Client, responses.Client, anthropic.Client}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, c := range codecs {
			req, err := c.DecodeRequest(body)
			if err != nil {
				var e *wire.Error
				if !errors.As(err, &e) || e.Status < 400 || e.Status > 499 {
					t.Fatalf("%s: not a 4xx *wire.Error: %v", c.Protocol(), err)
				}
				if goNames.MatchString(e.Message) {
					t.Fatalf("%s: error names Go types: %q", c.Protocol(), e.Message)
				}
				if !json.Valid(c.EncodeError(e)) {
					t.Fatalf("%s: error body is not JSON: %s", c.Protocol(), c.EncodeError(e))
				}
				continue
			}
			if req.Model == "" {
				t.Fatalf("%s: request without a model: %s", c.Protocol(), body)
			}
		}
	})
}

// FuzzChatDecodeResponse: the model-side parser reads any body into an answer or an
// error, and every answer it reads renders in each client protocol as valid JSON.
func FuzzChatDecodeResponse(f *testing.F) {
	seedGlob(f, "openai/pydantic-chat-*.response.json", "moonshot/*.response.json", "openrouter/*.response.json", "zhipu/docs-chat-web-search.response.json")
	for _, s := range []string{``, `{}`, `{"choices":[]}`, `{"choices":[null]}`, `{"choices":[{"message":{"content":5}}]}`,
		`{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","function":{"name":"web_search","arguments":"{"}}]},"finish_reason":"tool_calls"}]}`} {
		f.Add([]byte(s))
	}
	model, ok := any(openaichat.Client).(wire.ModelCodec)
	if !ok {
		f.Fatal("the Chat codec is not a model codec")
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := model.DecodeResponse(body)
		if err != nil {
			return
		}
		resp.ID, resp.JobID, resp.Model, resp.Created, resp.Status = "job_fuzz", "job_fuzz", "m", time.Unix(1, 0), wire.StatusCompleted
		for _, c := range []wire.ClientCodec{openaichat.Client, responses.Client, anthropic.Client} {
			b, err := c.EncodeResponse(resp)
			if err != nil {
				continue
			}
			if !json.Valid(b) {
				t.Fatalf("%s: answer is not JSON: %s", c.Protocol(), b)
			}
		}
	})
}

// FuzzSSERoundTrip: what WriteSSE writes, ReadSSE reads back the same — names and
// data, event for event — for every event a codec can produce (single-line names
// and data; keep-alives are comments and read as nothing).
func FuzzSSERoundTrip(f *testing.F) {
	f.Add("response.output_text.delta", []byte(`{"delta":"hi"}`), "", []byte(`{"x":1}`), false)
	f.Add("", []byte(`[DONE]`), "message_stop", []byte(`{}`), true)
	f.Add("a:b", []byte(": not a comment"), "event", []byte(" leading space"), false)
	f.Fuzz(func(t *testing.T, name1 string, data1 []byte, name2 string, data2 []byte, keepAlive bool) {
		// A codec's events are one line each: JSON never contains a raw newline.
		if bytes.ContainsAny(data1, "\r\n") || bytes.ContainsAny(data2, "\r\n") || bytes.ContainsAny([]byte(name1+name2), "\r\n") {
			t.Skip()
		}
		evs := []wire.Event{{Name: name1, Data: data1}}
		if keepAlive {
			evs = append(evs, wire.Event{})
		}
		evs = append(evs, wire.Event{Name: name2, Data: data2})
		var buf bytes.Buffer
		wire.WriteSSE(&buf, evs)
		var got []wire.Event
		err := llm.ReadSSE(&buf, func(name string, data []byte) error {
			got = append(got, wire.Event{Name: name, Data: bytes.Clone(data)})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var want []wire.Event
		for _, e := range evs {
			if e.Data != nil {
				want = append(want, wire.Event{Name: e.Name, Data: e.Data})
			}
		}
		if len(got) != len(want) {
			t.Fatalf("wrote %d events, read %d: %q", len(want), len(got), got)
		}
		for i := range want {
			if got[i].Name != want[i].Name || !bytes.Equal(got[i].Data, want[i].Data) {
				t.Fatalf("event %d: wrote %q %q, read %q %q", i, want[i].Name, want[i].Data, got[i].Name, got[i].Data)
			}
		}
	})
}
