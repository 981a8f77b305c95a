package fleet_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
)

// streamChat posts a streaming chat request (body written as is) and returns the
// data lines of its answer.
func streamChat(t *testing.T, f *fleettest.Fleet, body string) []string {
	t.Helper()
	resp, err := http.Post(f.URL+"/v1/chat/completions", "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var data []string
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "data: "); ok {
			data = append(data, v)
		}
	}
	return data
}

// stream_options is decoded, not matched as text: include_usage written with spaces
// still adds the usage chunk; a failed job's error chunk has "code": null, not "".
func TestStreamOptionsAndErrorChunk(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	data := streamChat(t, f, `{"model": "`+demo.Model+`", "stream": true, "stream_options": { "include_usage" : true },
		"messages": [{"role": "user", "content": "hello, no search needed"}]}`)
	if len(data) < 3 || data[len(data)-1] != "[DONE]" || !strings.Contains(data[len(data)-2], `"usage":{`) {
		t.Errorf("no usage chunk before [DONE]: %q", data)
	}

	// A job cancelled while its model call is being retried ends without an error code.
	f.Sim.SetFault("/v1/chat", 429, 30*time.Second, 0)
	resp, err := http.Post(f.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"`+demo.Model+`","stream":true,"messages":[{"role":"user","content":"hi again"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	id := resp.Header.Get("X-Searchfleet-Job-Id")
	if status, body, _ := f.Do(t, "POST", "/v1/jobs/"+id+"/cancel", nil); status != 200 {
		t.Fatalf("cancel %q: %d %s", id, status, body)
	}
	b, _ := io.ReadAll(resp.Body)
	data = nil
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "data: "); ok {
			data = append(data, v)
		}
	}
	if len(data) < 2 {
		t.Fatalf("stream: %q", data)
	}
	var chunk struct {
		Error map[string]json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal([]byte(data[len(data)-2]), &chunk); err != nil || chunk.Error == nil {
		t.Fatalf("no error chunk: %q", data)
	}
	if c, ok := chunk.Error["code"]; !ok || string(c) == `""` {
		t.Errorf("error chunk code is %s, want null or a code: %s", c, data[len(data)-2])
	}
}
