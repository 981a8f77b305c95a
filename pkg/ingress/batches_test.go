package ingress_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/batch"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/ingress"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// batchAPI is the ingress's batch and file routes over a batch service on a real
// NATS server and the real Redis (no workers: batches stay validating).
func batchAPI(t *testing.T) http.Handler {
	t.Helper()
	b, _ := bustest.New(t)
	rdb, prefix := testenv.Redis(t)
	store := state.New(rdb, prefix, time.Hour)
	log := slog.New(slog.DiscardHandler)
	batches := &batch.Service{Bus: b, Store: batch.StoreOf(store), Ender: jobs.NewEnder(store.Jobs, b, nil, nil), Models: []string{"m1"}, Log: log}
	s := ingress.New(ingress.Options{Bus: b, Store: ingress.StoreOf(store), Models: []string{"m1"}, MaxBody: 1 << 20, Log: log, Batches: batches})
	return s.Handler()
}

func call(t *testing.T, h http.Handler, method, path, contentType string, body io.Reader) (int, http.Header, []byte) {
	t.Helper()
	req := httptest.NewRequest(method, path, body).WithContext(t.Context())
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Header(), rec.Body.Bytes()
}

func callJSON(t *testing.T, h http.Handler, method, path string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	code, _, resp := call(t, h, method, path, "application/json", r)
	return code, resp
}

// The batch routes answer the service's refusals with their statuses and the OpenAI
// error shape: 400 with the invalid lines, 404 for an unknown batch or file, 409 for
// cancelling an ended one.
func TestBatchRoutes(t *testing.T) {
	t.Parallel()
	h := batchAPI(t)
	code, body := callJSON(t, h, "POST", "/v1/batches", map[string]any{"queries": []string{"one", " "}, "model": "m1"})
	if code != 400 || !strings.Contains(string(body), `"param":"queries"`) || !strings.Contains(string(body), `"code":"empty_query"`) {
		t.Errorf("invalid queries: %d %s", code, body)
	}
	code, body = callJSON(t, h, "POST", "/v1/batches", map[string]any{"queries": []string{"one"}, "completion_window": "1y"})
	if code != 400 || !strings.Contains(string(body), `"param":"completion_window"`) {
		t.Errorf("bad window: %d %s", code, body)
	}
	code, body = callJSON(t, h, "POST", "/v1/batches", map[string]any{"input_file_id": "file-nope"})
	if code != 404 || !strings.Contains(string(body), `"code":"file_not_found"`) {
		t.Errorf("unknown input file: %d %s", code, body)
	}
	code, body = callJSON(t, h, "POST", "/v1/batches", map[string]any{"queries": []string{"one", "two"}, "metadata": map[string]string{"run": "x"}})
	var v batch.View
	if err := json.Unmarshal(body, &v); code != 200 || err != nil || v.Status != "validating" || v.RequestCounts.Total != 2 {
		t.Fatalf("create: %d %s", code, body)
	}
	if code, body = callJSON(t, h, "GET", "/v1/batches/"+v.ID, nil); code != 200 || !strings.Contains(string(body), `"id":"`+v.ID+`"`) {
		t.Errorf("get: %d %s", code, body)
	}
	if code, body = callJSON(t, h, "GET", "/v1/batches/batch_nope", nil); code != 404 || !strings.Contains(string(body), `"code":"batch_not_found"`) {
		t.Errorf("unknown batch: %d %s", code, body)
	}
	if code, body = callJSON(t, h, "GET", "/v1/batches?limit=5", nil); code != 200 || !strings.Contains(string(body), `"first_id":"`+v.ID+`"`) {
		t.Errorf("list: %d %s", code, body)
	}
	if code, _ = callJSON(t, h, "GET", "/v1/batches?limit=0", nil); code != 400 {
		t.Errorf("limit 0: %d", code)
	}
	if code, body = callJSON(t, h, "POST", "/v1/batches/"+v.ID+"/cancel", nil); code != 200 || !strings.Contains(string(body), `"status":"cancelling"`) {
		t.Errorf("cancel: %d %s", code, body)
	}
	if code, body = callJSON(t, h, "POST", "/v1/batches/"+v.ID+"/cancel", nil); code != 200 {
		t.Errorf("cancel again: %d %s", code, body)
	}
	// The queries became an input file of the tenant's.
	if code, body = callJSON(t, h, "GET", "/v1/files/"+v.InputFileID+"/content", nil); code != 200 || strings.Count(string(body), "\n") != 2 {
		t.Errorf("input content: %d %s", code, body)
	}
}

// A file is uploaded (validated as it streams), read, listed and deleted; an invalid
// one is refused with its line numbers.
func TestFileRoutes(t *testing.T) {
	t.Parallel()
	h := batchAPI(t)
	upload := func(content string) (int, []byte) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		fw, _ := mw.CreateFormFile("file", "in.jsonl")
		fw.Write([]byte(content))
		mw.WriteField("purpose", "batch")
		mw.Close()
		code, _, body := call(t, h, "POST", "/v1/files", mw.FormDataContentType(), &buf)
		return code, body
	}
	line := `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m1","messages":[{"role":"user","content":"hi"}]}}`
	code, body := upload(line + "\nnope\n")
	if code != 400 || !strings.Contains(string(body), `"line":2`) || !strings.Contains(string(body), `"param":"file"`) {
		t.Errorf("invalid upload: %d %s", code, body)
	}
	code, body = upload(line + "\n")
	var f struct {
		ID    string `json:"id"`
		Bytes int64  `json:"bytes"`
	}
	if err := json.Unmarshal(body, &f); code != 200 || err != nil || f.Bytes != int64(len(line)+1) {
		t.Fatalf("upload: %d %s", code, body)
	}
	code, hdr, content := call(t, h, "GET", "/v1/files/"+f.ID+"/content", "", nil)
	if code != 200 || string(content) != line+"\n" || !strings.Contains(hdr.Get("Content-Disposition"), "in.jsonl") {
		t.Errorf("content: %d %q %v", code, content, hdr)
	}
	if code, body = callJSON(t, h, "GET", "/v1/files?purpose=batch", nil); code != 200 || !strings.Contains(string(body), f.ID) {
		t.Errorf("list: %d %s", code, body)
	}
	if code, body = callJSON(t, h, "DELETE", "/v1/files/"+f.ID, nil); code != 200 || !strings.Contains(string(body), `"deleted":true`) {
		t.Errorf("delete: %d %s", code, body)
	}
	if code, body = callJSON(t, h, "GET", "/v1/files/"+f.ID, nil); code != 404 || !strings.Contains(string(body), `"code":"file_not_found"`) {
		t.Errorf("deleted file: %d %s", code, body)
	}
}
