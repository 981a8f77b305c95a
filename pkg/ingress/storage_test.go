package ingress_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/batch"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/ingress"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// storage is an ingress's file and batch routes with tenants "a" (key ka, limits a)
// and "b" (key kb, defaults def), a body limit and a bounded file store.
type storage struct {
	h       http.Handler
	batches *batch.Service
}

func newStorage(t *testing.T, maxBody, filesMax int64, def, a config.Limits) *storage {
	t.Helper()
	b, _ := bustest.New(t)
	rdb, prefix := testenv.Redis(t)
	store := state.New(rdb, prefix, time.Hour)
	log := slog.New(slog.DiscardHandler)
	tenants := []config.Tenant{{ID: "a", APIKeys: []string{"ka"}, Limits: a}, {ID: "b", APIKeys: []string{"kb"}}}
	keys, err := ingress.NewTenants(tenants)
	if err != nil {
		t.Fatal(err)
	}
	limits := config.NewTenantLimits(def, tenants)
	m := metrics.New()
	batches := &batch.Service{Bus: b, Store: batch.StoreOf(store), Ender: jobs.NewEnder(store.Jobs, b, nil, nil), Models: []string{"m1"}, Log: log,
		Limits: limits, FilesMaxBytes: filesMax, Metrics: m}
	s := ingress.New(ingress.Options{Bus: b, Store: ingress.StoreOf(store), Models: []string{"m1"}, MaxBody: maxBody, Log: log, Batches: batches, Tenants: keys, Limits: limits, Metrics: m})
	return &storage{h: s.Handler(), batches: batches}
}

func (st *storage) do(t *testing.T, key, method, path, contentType string, body []byte) (int, http.Header, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, bytes.NewReader(body)).WithContext(t.Context())
	req.Header.Set("Authorization", "Bearer "+key)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	st.h.ServeHTTP(rec, req)
	return rec.Code, rec.Header(), rec.Body.String()
}

// inputFile is a valid batch input of n lines, each padded to about lineBytes.
func inputFile(n, lineBytes int) []byte {
	var buf bytes.Buffer
	for i := range n {
		q := strings.Repeat("x", max(1, lineBytes-120))
		fmt.Fprintf(&buf, `{"custom_id":"c%d","method":"POST","url":"/v1/chat/completions","body":{"model":"m1","messages":[{"role":"user","content":"%s"}]}}`+"\n", i, q)
	}
	return buf.Bytes()
}

// upload posts a file as the OpenAI SDKs do (file first), with extra form fields.
func (st *storage) upload(t *testing.T, key string, content []byte, fields map[string]string) (int, http.Header, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", "in.jsonl")
	fw.Write(content)
	mw.WriteField("purpose", "batch")
	for k, v := range fields {
		mw.WriteField(k, v)
	}
	mw.Close()
	return st.do(t, key, "POST", "/v1/files", mw.FormDataContentType(), buf.Bytes())
}

func fileID(t *testing.T, body string) string {
	t.Helper()
	var v struct {
		ID        string `json:"id"`
		ExpiresAt *int64 `json:"expires_at"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil || v.ID == "" || v.ExpiresAt == nil {
		t.Fatalf("file object without id or expires_at: %s", body)
	}
	return v.ID
}

// An upload with expires_after is gone at its expiry: its metadata at once, its
// bytes with the next sweep. One without gets the default expiry.
func TestUploadExpiresAfter(t *testing.T) {
	t.Parallel()
	st := newStorage(t, 1<<20, 0, config.Limits{}, config.Limits{})
	code, _, body := st.upload(t, "ka", inputFile(2, 200), map[string]string{"expires_after[anchor]": "created_at", "expires_after[seconds]": "1"})
	if code != 200 {
		t.Fatalf("upload: %d %s", code, body)
	}
	id := fileID(t, body)
	if code, _, body := st.upload(t, "ka", inputFile(1, 200), map[string]string{"expires_after[anchor]": "created_at", "expires_after[seconds]": "0"}); code != 400 || !strings.Contains(body, `"param":"expires_after"`) {
		t.Errorf("expires_after 0: %d %s", code, body)
	}
	code, _, body = st.upload(t, "ka", inputFile(1, 200), nil)
	var kept struct {
		CreatedAt int64 `json:"created_at"`
		ExpiresAt int64 `json:"expires_at"`
	}
	json.Unmarshal([]byte(body), &kept)
	if code != 200 || kept.ExpiresAt-kept.CreatedAt != int64(batch.DefaultFileExpiry.Seconds()) {
		t.Errorf("default expiry: %d %s", code, body)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go st.batches.Sweep(ctx, 50*time.Millisecond)
	waitFor(t, "the file's metadata to expire", func() bool {
		code, _, _ := st.do(t, "ka", "GET", "/v1/files/"+id, "", nil)
		return code == 404
	})
	waitFor(t, "the sweep to delete the file's bytes", func() bool {
		rc, err := st.batches.OpenFile(t.Context(), id)
		if err == nil {
			rc.Close()
		}
		return err != nil
	})
	if _, _, list := st.do(t, "ka", "GET", "/v1/files", "", nil); strings.Contains(list, id) {
		t.Errorf("expired file still listed: %s", list)
	}
}

// The file store refuses a file past its size bound with 507 in the OpenAI shape and
// keeps nothing of it; the files stored before are intact.
func TestFileStoreFull(t *testing.T) {
	t.Parallel()
	st := newStorage(t, 1<<20, 600<<10, config.Limits{}, config.Limits{})
	first := inputFile(400, 1000) // ~400 KB
	if code, _, body := st.upload(t, "ka", first, nil); code != 200 {
		t.Fatalf("first upload: %d %s", code, body)
	}
	code, _, body := st.upload(t, "kb", first, nil)
	if code != 507 || !strings.Contains(body, `"code":"insufficient_storage"`) || !strings.Contains(body, `"error"`) {
		t.Errorf("upload past the store's bound: %d %s", code, body)
	}
	if _, _, list := st.do(t, "kb", "GET", "/v1/files", "", nil); strings.Contains(list, `"id":"file-`) {
		t.Errorf("the refused file is listed: %s", list)
	}
	// What was refused took no room: a small file still fits.
	if code, _, body := st.upload(t, "kb", inputFile(10, 1000), nil); code != 200 {
		t.Errorf("small upload after a refused one: %d %s", code, body)
	}
}

// A tenant's file quota (count and bytes) refuses with 429 past it; another tenant
// is not affected.
func TestFileQuotaPerTenant(t *testing.T) {
	t.Parallel()
	st := newStorage(t, 1<<20, 0, config.Limits{}, config.Limits{Files: 2, FileBytes: 50_000})
	if code, _, body := st.upload(t, "ka", inputFile(10, 1000), nil); code != 200 {
		t.Fatalf("first: %d %s", code, body)
	}
	code, hdr, body := st.upload(t, "ka", inputFile(60, 1000), nil) // over the bytes left
	if code != 429 || !strings.Contains(body, `"code":"quota_exceeded"`) || hdr.Get("Retry-After") == "" {
		t.Errorf("over the byte quota: %d %s", code, body)
	}
	if code, _, body := st.upload(t, "ka", inputFile(1, 200), nil); code != 200 {
		t.Fatalf("second: %d %s", code, body)
	}
	if code, _, body := st.upload(t, "ka", inputFile(1, 200), nil); code != 429 || !strings.Contains(body, "2 files") {
		t.Errorf("third file: %d %s", code, body)
	}
	for range 3 {
		if code, _, body := st.upload(t, "kb", inputFile(60, 1000), nil); code != 200 {
			t.Errorf("tenant b: %d %s", code, body)
		}
	}
}

// POST /v1/batches respects FLEET_MAX_BODY_BYTES: a body over it is 413 in the
// OpenAI shape (and creates nothing); a large one under it is a batch.
func TestBatchBodyLimit(t *testing.T) {
	t.Parallel()
	st := newStorage(t, 256<<10, 0, config.Limits{}, config.Limits{})
	body := func(n int) []byte {
		qs := make([]string, n)
		for i := range qs {
			qs[i] = fmt.Sprintf("question %d %s", i, strings.Repeat("y", 200))
		}
		b, _ := json.Marshal(map[string]any{"model": "m1", "queries": qs})
		return b
	}
	big := body(1_500) // ~330 KB
	code, _, resp := st.do(t, "ka", "POST", "/v1/batches", "application/json", big)
	if code != 413 || !strings.Contains(resp, `"code":"request_too_large"`) || !strings.Contains(resp, `"type":"invalid_request_error"`) {
		t.Errorf("over the limit: %d %.300s", code, resp)
	}
	if _, _, list := st.do(t, "ka", "GET", "/v1/batches", "", nil); strings.Contains(list, `"id":"batch_`) {
		t.Errorf("a refused body created a batch: %s", list)
	}
	code, _, resp = st.do(t, "ka", "POST", "/v1/batches", "application/json", body(1_000)) // ~220 KB
	if code != 200 || !strings.Contains(resp, `"total":1000`) {
		t.Errorf("under the limit: %d %.300s", code, resp)
	}
}

// TestBatchBodyPeakHeap measures the heap a 60 MB {queries} body takes beyond the
// body itself (run with SEARCHFLEET_HEAP=1 -v; it stores 60 MB). The collector runs
// at GOGC=5 meanwhile, so the peak is close to what is live rather than to the
// collector's pacing.
func TestBatchBodyPeakHeap(t *testing.T) {
	if os.Getenv("SEARCHFLEET_HEAP") == "" {
		t.Skip("set SEARCHFLEET_HEAP=1 to measure")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	st := newStorage(t, 64<<20, 0, config.Limits{}, config.Limits{})
	for _, modelFirst := range []bool{true, false} {
		qs := make([]string, 50_000)
		for i := range qs {
			qs[i] = fmt.Sprintf("question %d %s", i, strings.Repeat("z", 1180))
		}
		raw, _ := json.Marshal(map[string]any{"queries": qs})
		if modelFirst {
			raw = append([]byte(`{"model":"m1",`), raw[1:]...)
		} else {
			raw = append(raw[:len(raw)-1], []byte(`,"model":"m1"}`)...)
		}
		qs = nil
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base, allocated := ms.HeapAlloc, ms.TotalAlloc
		var peak atomic.Uint64
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				if m.HeapAlloc > peak.Load() {
					peak.Store(m.HeapAlloc)
				}
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
			}
		}()
		code, _, resp := st.do(t, "ka", "POST", "/v1/batches", "application/json", raw)
		close(stop)
		<-done
		if code != 200 {
			t.Fatalf("%d %.300s", code, resp)
		}
		runtime.ReadMemStats(&ms)
		t.Logf("body %.1f MB (model first: %v): peak heap above the body %.1f MB, %.0f MB allocated", float64(len(raw))/1e6, modelFirst,
			float64(peak.Load()-base)/1e6, float64(ms.TotalAlloc-allocated)/1e6)
	}
}

// openai-go's expires_after reaches the upload as the OpenAI API reads it: the file
// object says when it expires.
func TestUploadExpiresAfterWithSDK(t *testing.T) {
	t.Parallel()
	st := newStorage(t, 1<<20, 0, config.Limits{}, config.Limits{})
	srv := httptest.NewServer(st.h)
	defer srv.Close()
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("ka"), option.WithMaxRetries(0))
	f, err := client.Files.New(t.Context(), openai.FileNewParams{File: openai.File(bytes.NewReader(inputFile(2, 200)), "in.jsonl", "application/jsonl"),
		Purpose: openai.FilePurposeBatch, ExpiresAfter: openai.FileNewParamsExpiresAfter{Seconds: 3600}})
	if err != nil {
		t.Fatal(err)
	}
	if f.ExpiresAt-f.CreatedAt != 3600 {
		t.Errorf("created %d, expires %d", f.CreatedAt, f.ExpiresAt)
	}
}
