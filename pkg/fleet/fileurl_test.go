package fleet_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/config"
)

// fileServer serves the files clients give by URL (a PDF and a text file) and counts
// the requests for each path.
type fileServer struct {
	URL  string
	mu   sync.Mutex
	hits map[string]int
}

func newFileServer(t *testing.T) *fileServer {
	pdf, _ := base64.StdEncoding.DecodeString(titlePDF())
	fs := &fileServer{hits: map[string]int{}}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fs.mu.Lock()
		fs.hits[r.URL.Path]++
		fs.mu.Unlock()
		switch r.URL.Path {
		case "/report.pdf":
			w.Header().Set("Content-Type", "application/pdf")
			w.Write(pdf)
		case "/notes.txt":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Write([]byte("The code is 0451."))
		case "/3k.txt", "/5k.txt":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Write([]byte(strings.Repeat("a", map[string]int{"/3k.txt": 3000, "/5k.txt": 5000}[r.URL.Path])))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	fs.URL = s.URL
	return fs
}

func (fs *fileServer) count(path string) int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.hits[path]
}

// urlFileRequest is a Responses request to model asking ask with one input_file by
// URL.
func urlFileRequest(model, ask, url string) map[string]any {
	return map[string]any{"model": model, "tools": []any{map[string]any{"type": "web_search"}}, "input": []any{map[string]any{
		"type": "message", "role": "user", "content": []any{
			map[string]any{"type": "input_text", "text": ask},
			map[string]any{"type": "input_file", "file_url": url},
		}}}}
}

// searchAsk makes the simulated model search before it answers: two model calls, so a
// file read at submission shows it is read once for the whole job.
const searchAsk = "Search the web: who won the 2022 world cup?"

// A file given by URL reaches a model that takes it by URL as its URL, unread by the
// fleet (Responses: input_file file_url; Anthropic: a url document); for the others
// the ingress reads it once, at submission, and the model gets its content in every
// call of the job: a PDF natively (Gemini inlineData), a text file as text (Chat). A
// URL that answers 404 is a 400 naming the parameter, with no model call.
func TestFileURLNativeOrReadOnce(t *testing.T) {
	f := fleettest.Start(t, fleettest.Env(func(e *config.Env) {
		e.FetchAllow, e.FetchTimeout = []string{"127.0.0.0/8"}, 5*time.Second
	}))
	files := newFileServer(t)
	for _, c := range []struct {
		name, path string
		body       map[string]any
		file       string // the file's path on the file server
		counter    string // the simulator's count of how the model got it, in every call
		reads      int    // how many times the fleet read the file
		calls      int    // at least this many model calls (2: a search hop, to show one read serves them all)
	}{
		{"responses model takes the URL", "/v1/responses", urlFileRequest(demo.ModelResponses, searchAsk, files.URL+"/report.pdf"), "/report.pdf", "model_file_url", 0, 2},
		{"anthropic model takes the URL", "/v1/messages", map[string]any{"model": demo.ModelClaude, "max_tokens": 1024,
			"messages": []any{map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": "Answer with the title of the document. sim:nosearch"},
				map[string]any{"type": "document", "title": "report.pdf", "source": map[string]any{"type": "url", "url": files.URL + "/report.pdf"}},
			}}}}, "/report.pdf", "model_file_url", 0, 1},
		{"gemini model gets the PDF read", "/v1/responses", urlFileRequest(demo.ModelGemini, searchAsk, files.URL+"/report.pdf"), "/report.pdf", "model_file", 1, 2},
		{"chat model gets the text read", "/v1/responses", urlFileRequest(demo.Model, searchAsk, files.URL+"/notes.txt"), "/notes.txt", "model_file_text", 1, 2},
		{"responses model gets a text file read", "/v1/responses", urlFileRequest(demo.ModelResponses, "What is the code? sim:nosearch", files.URL+"/notes.txt"), "/notes.txt", "model_file_text", 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, reads := f.Sim.Stats().Requests, files.count(c.file)
			status, body, _ := f.Do(t, "POST", c.path, c.body)
			if status != 200 {
				t.Fatalf("%d %s", status, body)
			}
			after := f.Sim.Stats().Requests
			calls := after["model"] - before["model"]
			if calls < int64(c.calls) {
				t.Errorf("the job made %d model calls, want at least %d", calls, c.calls)
			}
			if after[c.counter]-before[c.counter] != calls {
				t.Errorf("%s in %d of %d model calls, want every one", c.counter, after[c.counter]-before[c.counter], calls)
			}
			for _, other := range []string{"model_file", "model_file_text", "model_file_url"} {
				if other != c.counter && after[other] != before[other] {
					t.Errorf("the model also got the file as %s", other)
				}
			}
			if n := files.count(c.file) - reads; n != c.reads {
				t.Errorf("the fleet read the file %d times, want %d", n, c.reads)
			}
		})
	}
	t.Run("unreadable URL", func(t *testing.T) {
		before := f.Sim.Stats().Requests["model"]
		status, body, _ := f.Do(t, "POST", "/v1/responses", urlFileRequest(demo.ModelGemini, searchAsk, files.URL+"/gone.pdf"))
		e := errorOf(t, body)
		if status != 400 || e.Type != "invalid_request_error" || e.Param != "input[0].content[1].file_url" || !strings.Contains(e.Message, "HTTP 404") {
			t.Fatalf("%d %s", status, body)
		}
		if n := f.Sim.Stats().Requests["model"] - before; n != 0 {
			t.Errorf("%d model calls for a refused request", n)
		}
	})
}

// fileURLError is an OpenAI or Anthropic error body's error.
type fileURLError struct {
	Type    string `json:"type"`
	Param   string `json:"param"`
	Message string `json:"message"`
}

func errorOf(t *testing.T, body []byte) fileURLError {
	t.Helper()
	var e struct {
		Error fileURLError `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		t.Fatalf("not an error body: %s", body)
	}
	return e.Error
}

// With production settings (no FLEET_FETCH_ALLOW) the fleet never reads a file from a
// loopback address a client gives, in any client protocol: a 400 in the client's
// protocol saying the address is private, without the address the name resolved to;
// the file server is never asked and no model is called.
func TestFileURLRefusesPrivateAddresses(t *testing.T) {
	f := fleettest.Start(t)
	files := newFileServer(t)
	local := strings.Replace(files.URL, "127.0.0.1", "localhost", 1) + "/report.pdf"
	for _, c := range []struct {
		name, path string
		body       map[string]any
		param      string
	}{
		{"responses", "/v1/responses", urlFileRequest(demo.ModelGemini, "Title? sim:nosearch", local), "input[0].content[1].file_url"},
		{"messages", "/v1/messages", map[string]any{"model": demo.Model, "max_tokens": 1024, "messages": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "Title? sim:nosearch"},
			map[string]any{"type": "document", "source": map[string]any{"type": "url", "url": local}},
		}}}}, "messages.0.content.1.source.url"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := f.Sim.Stats().Requests["model"]
			status, body, _ := f.Do(t, "POST", c.path, c.body)
			e := errorOf(t, body)
			if status != 400 || e.Type != "invalid_request_error" || !strings.Contains(e.Message, "no public address") || !strings.Contains(e.Message, c.param) {
				t.Fatalf("%d %s", status, body)
			}
			if c.path == "/v1/responses" && e.Param != c.param {
				t.Errorf("param %q, want %q", e.Param, c.param)
			}
			if c.path == "/v1/messages" && !strings.Contains(string(body), `"type":"error"`) {
				t.Errorf("not an Anthropic error: %s", body)
			}
			for _, addr := range []string{"127.0.0.1", "::1"} {
				if strings.Contains(string(body), addr) {
					t.Errorf("the error names the address %s: %s", addr, body)
				}
			}
			if n := f.Sim.Stats().Requests["model"] - before; n != 0 {
				t.Errorf("%d model calls for a refused request", n)
			}
		})
	}
	if n := files.count("/report.pdf"); n != 0 {
		t.Errorf("the file server was asked %d times", n)
	}
}

// The files one request gives by URL are read up to the bound of a request body
// (FLEET_MAX_BODY_BYTES), one file and all together: past it, a 400 saying so.
func TestFileURLSizeBound(t *testing.T) {
	f := fleettest.Start(t, fleettest.Env(func(e *config.Env) {
		e.FetchAllow, e.MaxBodyBytes = []string{"127.0.0.0/8"}, 4096
	}))
	files := newFileServer(t)
	two := urlFileRequest(demo.Model, "Count the letters. sim:nosearch", files.URL+"/3k.txt?part=1")
	content := two["input"].([]any)[0].(map[string]any)
	content["content"] = append(content["content"].([]any), map[string]any{"type": "input_file", "file_url": files.URL + "/3k.txt?part=2"})
	for _, c := range []struct {
		name  string
		body  map[string]any
		param string
		words string
	}{
		{"one file too large", urlFileRequest(demo.Model, "Count the letters. sim:nosearch", files.URL+"/5k.txt"), "input[0].content[1].file_url", "larger than 4096 bytes"},
		{"two files together too large", two, "input[0].content[2].file_url", "together exceed 4096 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body, _ := f.Do(t, "POST", "/v1/responses", c.body)
			if e := errorOf(t, body); status != 400 || e.Param != c.param || !strings.Contains(e.Message, c.words) {
				t.Fatalf("%d %s", status, body)
			}
		})
	}
	status, body, _ := f.Do(t, "POST", "/v1/responses", urlFileRequest(demo.Model, "Count the letters. sim:nosearch", files.URL+"/3k.txt"))
	if status != 200 {
		t.Fatalf("a file within the bound: %d %s", status, body)
	}
}
