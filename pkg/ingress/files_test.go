package ingress_test

import (
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/ingress"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// A file the request's model can read neither as it is nor as text is a 400 at
// submission in the client's protocol, naming the model and the file; a file it reads
// (a PDF for a Chat model, a text file for Kimi) makes a job.
func TestFilesCheckedAtSubmission(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	rdb, prefix := testenv.Redis(t)
	s := ingress.New(ingress.Options{Bus: b, Store: ingress.StoreOf(state.New(rdb, prefix, time.Hour)), Models: []string{"chat-m", "kimi-m"}, MaxBody: 1 << 20, JobTimeout: time.Minute,
		Log: slog.New(slog.DiscardHandler), Targets: map[string]ingress.ModelTarget{
			"chat-m": {Protocol: wire.OpenAIChat, Model: "up", API: openaichat.Model},
			"kimi-m": {Protocol: wire.OpenAIChat, Model: "up", API: openaichat.Kimi},
		}})
	h := s.Handler()
	zip := base64.StdEncoding.EncodeToString([]byte("PK\x03\x04\x00\x00binary"))
	pdf := base64.StdEncoding.EncodeToString([]byte("%PDF-1.4\n1 0 obj\n<< >>\nendobj\n%%EOF"))
	note := base64.StdEncoding.EncodeToString([]byte("The code is 0451."))
	post := func(path, body string) (int, string) {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code, w.Body.String()
	}
	for _, c := range []struct {
		name, path, body string
		status           int
	}{
		{"chat client, zip", "/v1/chat/completions", `{"model":"kimi-m","messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"file","file":{"filename":"a.zip","file_data":"data:application/zip;base64,` + zip + `"}}]}]}`, 400},
		{"anthropic client, zip", "/v1/messages", `{"model":"chat-m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"document","title":"a.zip","source":{"type":"base64","media_type":"application/zip","data":"` + zip + `"}}]}]}`, 400},
		{"responses client, PDF to Kimi", "/v1/responses", `{"model":"kimi-m","input":[{"role":"user","content":[{"type":"input_file","filename":"a.pdf","file_data":"` + pdf + `"}]}]}`, 400},
		{"responses client, PDF to Chat", "/v1/responses", `{"model":"chat-m","background":true,"input":[{"role":"user","content":[{"type":"input_file","filename":"a.pdf","file_data":"` + pdf + `"}]}]}`, 200},
		{"responses client, text to Kimi", "/v1/responses", `{"model":"kimi-m","background":true,"input":[{"role":"user","content":[{"type":"input_file","filename":"a.txt","file_data":"` + note + `"}]}]}`, 200},
	} {
		status, body := post(c.path, c.body)
		if status != c.status {
			t.Errorf("%s: %d %s", c.name, status, body)
			continue
		}
		if status != 400 {
			continue
		}
		var e struct {
			Type  string `json:"type"` // Anthropic's "error"
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		json.Unmarshal([]byte(body), &e)
		model, file := "kimi-m", "a.zip"
		if strings.HasPrefix(c.name, "anthropic") {
			model = "chat-m"
			if e.Type != "error" {
				t.Errorf("%s: not Anthropic's error shape: %s", c.name, body)
			}
		}
		if strings.Contains(c.name, "PDF") {
			file = "a.pdf"
		}
		if e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, `"`+model+`"`) || !strings.Contains(e.Error.Message, file) {
			t.Errorf("%s: %s", c.name, body)
		}
	}
}
