package llm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream/upstreamtest"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

var goNames = regexp.MustCompile(`Go (struct|value)|cannot unmarshal|json: |\b(llm|json)\.[A-Z]|map\[string\]`)

func seedGlob(f *testing.F, globs ...string) {
	for _, g := range globs {
		names, _ := fs.Glob(fixtures.FS(), g)
		if len(names) == 0 {
			f.Fatalf("no fixtures match %s", g)
		}
		for _, n := range names {
			f.Add(fixtures.Read(n))
		}
	}
}

// FuzzParseChatRequest: the chat endpoint's validator answers any body with a request
// or a RequestError in JSON's words (never Go's), and a request it accepts is stored
// in canonical form and read back with the same model, system prompt, messages and
// tools.
func FuzzParseChatRequest(f *testing.F) {
	seedGlob(f, "openai/pydantic-chat-*.request.json", "openrouter/*.request.json", "zhipu/*.request.json")
	for _, s := range []string{``, `[]`, `{}`, `{"model":"m","messages":[{"role":5}]}`, `{"model":"m","messages":[],"n":2}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"web_search_options":{"user_location":{"approximate":{"country":"x"}}}}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"searchfleet":{"protocol":"x"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := llm.ParseChatRequest(body)
		if err != nil {
			var re *llm.RequestError
			if !errors.As(err, &re) {
				t.Fatalf("not a RequestError: %v", err)
			}
			if goNames.MatchString(re.Message) {
				t.Fatalf("error names Go types: %q", re.Message)
			}
			return
		}
		canon, err := openaichat.FromChat(req)
		if err != nil {
			return // refused at the ingress, in Chat's error shape
		}
		stored, err := wire.EncodeStored(wire.OpenAIChat, canon)
		if err != nil {
			t.Fatalf("an accepted request cannot be stored: %v", err)
		}
		back, err := wire.DecodeStored(stored)
		if err != nil {
			t.Fatalf("the stored request is unreadable: %v\n%s", err, stored)
		}
		if r := back.Request; r.Model != canon.Model || len(r.Messages) != len(canon.Messages) || len(r.Tools) != len(canon.Tools) || r.System != canon.System {
			t.Fatalf("storing changed the request: %+v → %+v", canon, r)
		}
	})
}

// bodyTransport answers every request with one status and body, without a network.
type bodyTransport struct {
	status int
	body   []byte
}

func (b bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: b.status, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(b.body)), Request: r}, nil
}

// FuzzComplete: the model caller (a Chat provider's) reads any answer (any status,
// any body) into a completion or an *llm.Error, never panicking; a completion has a
// message that is JSON, and no error carries the key.
func FuzzComplete(f *testing.F) {
	seedGlob(f, "openai/pydantic-chat-*.response.json", "moonshot/*.response.json", "openrouter/*.response.json", "zhipu/docs-chat-web-search.response.json")
	for _, s := range []string{``, `{}`, `{"choices":[]}`, `{"choices":[{"message":null}]}`, `{"error":{"message":"sk-fuzz-key bad","code":429}}`, `{"error":{"code":"x"}}`} {
		f.Add([]byte(s))
	}
	const key = "sk-fuzz-key"
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, status := range []int{200, 400, 429, 503} {
			c := upstreamtest.Chat{Caller: upstream.New(openaichat.Model, "fuzz", "http://model.invalid/v1", key, &http.Client{Transport: bodyTransport{status, body}}, upstream.Options{})}
			comp, err := c.Complete(context.Background(), []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), nil)
			if err != nil {
				var le *llm.Error
				if !errors.As(err, &le) {
					t.Fatalf("%d: not an *llm.Error: %v", status, err)
				}
				if strings.Contains(le.Message, key) {
					t.Fatalf("%d: the key reaches the error: %q", status, le.Message)
				}
				continue
			}
			if status != 200 || !json.Valid(comp.Message) {
				t.Fatalf("%d: completion %+v", status, comp)
			}
		}
	})
}
