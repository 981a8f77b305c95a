package simulator_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// Every model endpoint takes its protocol's file shape, as the real API does, answers
// the text, and counts how the file came: in the protocol's own shape, inlined as
// text, or by its URL where the protocol has a form for that.
func TestModelEndpointsTakeFiles(t *testing.T) {
	sim := simulator.New(simulator.Options{})
	hs, url, err := sim.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close() })
	const pdf = "JVBERi0xLjQK" // "%PDF-1.4\n"
	const ask = "What is the title? sim:nosearch"
	for _, c := range []struct {
		name, path, body, counter string
	}{
		{"chat file", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"` + ask + `"},{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,` + pdf + `"}}]}]}`, "model_file"},
		{"responses input_file", "/v1/responses", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"` + ask + `"},{"type":"input_file","filename":"a.pdf","file_data":"data:application/pdf;base64,` + pdf + `"}]}]}`, "model_file"},
		{"anthropic document", "/v1/messages", `{"model":"m","max_tokens":99,"messages":[{"role":"user","content":[{"type":"text","text":"` + ask + `"},{"type":"document","title":"a.pdf","source":{"type":"base64","media_type":"application/pdf","data":"` + pdf + `"}}]}]}`, "model_file"},
		{"gemini inlineData", "/v1beta/models/m:generateContent", `{"contents":[{"role":"user","parts":[{"text":"` + ask + `"},{"inlineData":{"mimeType":"application/pdf","data":"` + pdf + `"}}]}]}`, "model_file"},
		{"responses input_file by URL", "/v1/responses", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"` + ask + `"},{"type":"input_file","file_url":"https://files.example.com/a.pdf"}]}]}`, "model_file_url"},
		{"anthropic document by URL", "/v1/messages", `{"model":"m","max_tokens":99,"messages":[{"role":"user","content":[{"type":"text","text":"` + ask + `"},{"type":"document","title":"a.pdf","source":{"type":"url","url":"https://files.example.com/a.pdf"}}]}]}`, "model_file_url"},
		{"chat text", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"` + ask + `\n<file name=\"a.txt\">\nhello\n</file>"}]}`, "model_file_text"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := sim.Stats().Requests[c.counter]
			req, _ := http.NewRequest(http.MethodPost, url+c.path, strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer k")
			req.Header.Set("x-api-key", "k")
			req.Header.Set("anthropic-version", "2023-06-01")
			req.Header.Set("x-goog-api-key", "k")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			after := sim.Stats().Requests
			if n := after[c.counter] - before; n != 1 {
				t.Errorf("%s counted %d times", c.counter, n)
			}
			if c.counter == "model_file" && after["model_file_url"] != 0 {
				t.Errorf("a file with data counted as given by URL")
			}
		})
	}
}
