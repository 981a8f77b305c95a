package ingress_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"mime/multipart"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/ingress"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// An upload with two 'file' parts is refused and nothing is stored: only one part
// could have been validated.
func TestUploadTwoFileParts(t *testing.T) {
	t.Parallel()
	h := batchAPI(t)
	good := `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m1","messages":[{"role":"user","content":"hi"}]}}` + "\n"
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", "bad.jsonl")
	fw.Write([]byte("not json at all\n"))
	fw, _ = mw.CreateFormFile("file", "good.jsonl")
	fw.Write([]byte(good))
	mw.WriteField("purpose", "batch")
	mw.Close()
	code, _, body := call(t, h, "POST", "/v1/files", mw.FormDataContentType(), &buf)
	if code != 400 || !strings.Contains(string(body), `"param":"file"`) {
		t.Errorf("two file parts: %d %s", code, body)
	}
	code, list := callJSON(t, h, "GET", "/v1/files", nil)
	var l struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(list, &l); code != 200 || err != nil || len(l.Data) != 0 {
		t.Errorf("files stored after a refused upload: %d %s", code, list)
	}
}

// A wrong method on a known path is 405 with Allow; an unknown path is 404; both in
// the OpenAI error shape.
func TestMethodNotAllowed(t *testing.T) {
	t.Parallel()
	h := batchAPI(t)
	cases := []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/v1/chat/completions", 405, "POST"},
		{"DELETE", "/v1/jobs/job_abcdef", 405, "GET, HEAD"},
		{"PUT", "/v1/files/file-x", 405, "GET, HEAD, DELETE"},
		{"GET", "/v1/nothing", 404, ""},
	}
	for _, c := range cases {
		code, hdr, body := call(t, h, c.method, c.path, "", nil)
		if code != c.status || hdr.Get("Allow") != c.allow || !strings.Contains(string(body), `"type":"invalid_request_error"`) {
			t.Errorf("%s %s: %d Allow=%q %s", c.method, c.path, code, hdr.Get("Allow"), body)
		}
	}
}

// A JSON endpoint refuses a body not declared JSON with 415, in its protocol's error
// shape, before anything is created: a cross-origin text/plain POST submits nothing.
func TestJSONContentTypeRequired(t *testing.T) {
	t.Parallel()
	h := batchAPI(t)
	body := `{"model":"m1","messages":[{"role":"user","content":"hi"}],"queries":["one"]}`
	for _, path := range []string{"/v1/chat/completions", "/v1/jobs", "/v1/responses", "/v1/messages", "/v1/batches"} {
		for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", ""} {
			code, _, resp := call(t, h, "POST", path, ct, strings.NewReader(body))
			if code != 415 || !strings.Contains(string(resp), `"error"`) {
				t.Errorf("POST %s as %q: %d %s", path, ct, code, resp)
			}
		}
	}
	if code, _, resp := call(t, h, "POST", "/v1/messages", "text/plain", strings.NewReader(body)); !strings.Contains(string(resp), `"type":"error"`) {
		t.Errorf("messages 415 is not in the Anthropic shape: %d %s", code, resp)
	}
	if code, list := callJSON(t, h, "GET", "/v1/batches", nil); code != 200 || strings.Contains(string(list), `"id":"batch`) {
		t.Errorf("a refused request created a batch: %d %s", code, list)
	}
	// application/json with parameters, and +json types, are JSON.
	code, _, resp := call(t, h, "POST", "/v1/batches", "application/json; charset=utf-8", strings.NewReader(body))
	if code != 200 {
		t.Errorf("application/json; charset=utf-8: %d %s", code, resp)
	}
}

// levels records the level of every log record.
type levels struct {
	mu  sync.Mutex
	got []slog.Level
}

func (l *levels) Enabled(context.Context, slog.Level) bool { return true }
func (l *levels) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, r.Level)
	return nil
}
func (l *levels) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *levels) WithGroup(string) slog.Handler      { return l }

// A client that hangs up while its submission is being recorded is logged, but not at
// ERROR: it is not a server error.
func TestClientHangupIsNotAnError(t *testing.T) {
	t.Parallel()
	b, _ := bustest.New(t)
	rdb, prefix := testenv.Redis(t)
	store := state.New(rdb, prefix, time.Hour)
	rec := &levels{}
	s := ingress.New(ingress.Options{Bus: b, Store: ingress.StoreOf(store), Models: []string{"m1"}, MaxBody: 1 << 20, JobTimeout: time.Minute, SyncWait: time.Minute,
		Log: slog.New(rec), Ender: jobs.NewEnder(store.Jobs, b, nil, nil)})
	h := s.Handler()
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the client has gone by the time the job is recorded
	for _, path := range []string{"/v1/jobs", "/v1/chat/completions"} {
		req := httptest.NewRequest("POST", path, strings.NewReader(`{"model":"m1","messages":[{"role":"user","content":"hi"}]}`)).WithContext(ctx)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k-"+path)
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.got) == 0 {
		t.Fatal("nothing was logged: the test did not reach a failed store call")
	}
	for _, l := range rec.got {
		if l >= slog.LevelError {
			t.Errorf("a client hang-up was logged at %s (all: %v)", l, rec.got)
		}
	}
}
