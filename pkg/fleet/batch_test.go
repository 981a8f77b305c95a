package fleet_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/redis/go-redis/v9"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// batchLine is one request line of a batch input file.
func batchLine(customID, question string) string {
	b, _ := json.Marshal(map[string]any{"custom_id": customID, "method": "POST", "url": "/v1/chat/completions",
		"body": map[string]any{"model": demo.Model, "messages": []any{map[string]any{"role": "user", "content": question}}}})
	return string(b)
}

// outLine is a line of a batch's output or error file.
type outLine struct {
	ID       string `json:"id"`
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int             `json:"status_code"`
		RequestID  string          `json:"request_id"`
		Body       json.RawMessage `json:"body"`
	} `json:"response"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func parseLines(t *testing.T, data []byte) []outLine {
	t.Helper()
	var out []outLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var l outLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("output line is not JSON: %v: %.200s", err, sc.Bytes())
		}
		out = append(out, l)
	}
	return out
}

// batchClient is a client of one tenant of a test fleet.
type batchClient struct {
	t   testing.TB
	url string
	key string
}

func (a batchClient) do(method, path string, body any) (int, []byte) {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, a.url+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if a.key != "" {
		req.Header.Set("Authorization", "Bearer "+a.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// batchObject is the part of a batch object the tests read.
type batchObject struct {
	ID            string `json:"id"`
	Status        string `json:"status"`
	OutputFileID  string `json:"output_file_id"`
	ErrorFileID   string `json:"error_file_id"`
	RequestCounts struct {
		Total, Completed, Failed int
	} `json:"request_counts"`
}

func (a batchClient) batch(id string) batchObject {
	a.t.Helper()
	status, body := a.do("GET", "/v1/batches/"+id, nil)
	if status != 200 {
		a.t.Fatalf("GET batch %s: %d %s", id, status, body)
	}
	var b batchObject
	json.Unmarshal(body, &b)
	return b
}

// waitBatch polls a batch until it has ended, for at most timeout.
func (a batchClient) waitBatch(id string, timeout time.Duration) batchObject {
	a.t.Helper()
	var b batchObject
	pollUntil(a.t, timeout, "batch "+id+" to end", func() bool {
		b = a.batch(id)
		switch b.Status {
		case "completed", "cancelled", "expired", "failed":
			return true
		}
		return false
	})
	return b
}

func (a batchClient) content(fileID string) []byte {
	a.t.Helper()
	if fileID == "" {
		return nil
	}
	status, body := a.do("GET", "/v1/files/"+fileID+"/content", nil)
	if status != 200 {
		a.t.Fatalf("file %s content: %d %s", fileID, status, body)
	}
	return body
}

// pollUntil polls cond until it holds, failing the test after timeout.
func pollUntil(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// accountFor checks that a batch's output and error files hold every custom_id of
// want exactly once, and returns the output and error lines.
func accountFor(t *testing.T, a batchClient, b batchObject, want []string) (out, errs []outLine) {
	t.Helper()
	out, errs = parseLines(t, a.content(b.OutputFileID)), parseLines(t, a.content(b.ErrorFileID))
	seen := map[string]int{}
	for _, l := range append(append([]outLine(nil), out...), errs...) {
		seen[l.CustomID]++
	}
	for _, id := range want {
		if seen[id] != 1 {
			t.Errorf("custom_id %s appears %d times in the output and error files", id, seen[id])
		}
		delete(seen, id)
	}
	if len(seen) > 0 {
		t.Errorf("output has unexpected custom_ids: %v", seen)
	}
	if len(out)+len(errs) != len(want) {
		t.Errorf("%d output + %d error lines, want %d", len(out), len(errs), len(want))
	}
	return out, errs
}

// The official OpenAI SDK uploads an input file, creates a batch, polls it to
// completed and downloads an output file with one answer per custom_id, in input
// order, each a chat.completion citing its sources.
func TestBatchWithOpenAISDK(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	ctx := t.Context()
	client := openai.NewClient(option.WithBaseURL(f.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))

	questions := []string{"Find the latest news about Go", "Search the web: weather in Paris today?", "Look up online who won the match yesterday"}
	var in strings.Builder
	for i, q := range questions {
		fmt.Fprintln(&in, batchLine(fmt.Sprintf("req-%d", i+1), q))
	}
	file, err := client.Files.New(ctx, openai.FileNewParams{File: openai.File(strings.NewReader(in.String()), "questions.jsonl", "application/jsonl"),
		Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	if file.Purpose != "batch" || file.Bytes != int64(in.Len()) || file.Filename != "questions.jsonl" {
		t.Errorf("file object %+v", file)
	}
	batch, err := client.Batches.New(ctx, openai.BatchNewParams{InputFileID: file.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h, Metadata: shared.Metadata{"run": "sdk"}})
	if err != nil {
		t.Fatal(err)
	}
	if batch.Status != openai.BatchStatusValidating || batch.RequestCounts.Total != 3 || batch.Metadata["run"] != "sdk" || batch.ExpiresAt == 0 {
		t.Errorf("new batch %s", batch.RawJSON())
	}
	pollUntil(t, time.Minute, "the batch to complete", func() bool {
		batch, err = client.Batches.Get(ctx, batch.ID)
		return err == nil && batch.Status == openai.BatchStatusCompleted
	})
	if c := batch.RequestCounts; c.Completed != 3 || c.Failed != 0 || batch.OutputFileID == "" || batch.ErrorFileID != "" || batch.CompletedAt == 0 {
		t.Fatalf("completed batch %s", batch.RawJSON())
	}
	resp, err := client.Files.Content(ctx, batch.OutputFileID)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	lines := parseLines(t, data)
	if len(lines) != 3 {
		t.Fatalf("%d output lines, want 3:\n%s", len(lines), data)
	}
	for i, l := range lines {
		if l.CustomID != fmt.Sprintf("req-%d", i+1) || l.Error != nil || l.Response == nil || l.Response.StatusCode != 200 {
			t.Fatalf("line %d: %+v", i, l)
		}
		var c openai.ChatCompletion
		if err := json.Unmarshal(l.Response.Body, &c); err != nil || c.Object != "chat.completion" || len(c.Choices) != 1 {
			t.Fatalf("line %d body is not a chat.completion: %v %s", i, err, l.Response.Body)
		}
		if msg := c.Choices[0].Message; !strings.Contains(msg.Content, "[1]") || len(msg.Annotations) == 0 {
			t.Errorf("line %d does not cite its sources: %q", i, msg.Content)
		}
	}
	out, err := client.Files.Get(ctx, batch.OutputFileID)
	if err != nil || out.Purpose != "batch_output" || out.Bytes != int64(len(data)) {
		t.Errorf("output file %+v %v", out, err)
	}
	page, err := client.Batches.List(ctx, openai.BatchListParams{Limit: openai.Int(10)})
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != batch.ID {
		t.Errorf("batch list %+v %v", page, err)
	}
	files, err := client.Files.List(ctx, openai.FileListParams{Purpose: openai.String("batch")})
	if err != nil || len(files.Data) != 1 || files.Data[0].ID != file.ID {
		t.Errorf("file list %+v %v", files, err)
	}
	if _, err := client.Files.Delete(ctx, file.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Files.Get(ctx, file.ID); !isStatus(err, 404) {
		t.Errorf("deleted file: %v", err)
	}
}

func isStatus(err error, status int) bool {
	var apiErr *openai.Error
	return errors.As(err, &apiErr) && apiErr.StatusCode == status
}

// The simple form — a list of questions — runs like a file: custom_ids q-1…q-n.
func TestBatchOfQueries(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	a := batchClient{t: t, url: f.URL}
	qs := []string{"Find the latest news about AI", "Search the web for NATS news", "Weather in Tokyo?", "Hello there"}
	status, body := a.do("POST", "/v1/batches", map[string]any{"queries": qs, "model": demo.Model, "metadata": map[string]string{"k": "v"}})
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var b batchObject
	json.Unmarshal(body, &b)
	b = a.waitBatch(b.ID, time.Minute)
	if b.Status != "completed" || b.RequestCounts.Total != 4 || b.RequestCounts.Completed != 4 {
		t.Fatalf("batch %+v", b)
	}
	out, _ := accountFor(t, a, b, []string{"q-1", "q-2", "q-3", "q-4"})
	for i, l := range out {
		if want := fmt.Sprintf("q-%d", i+1); l.CustomID != want {
			t.Errorf("line %d is %s, want %s (input order)", i, l.CustomID, want)
		}
	}
}

// Invalid input is refused before anything is created, and the error names every
// bad line by number.
func TestBatchValidation(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	ctx := t.Context()
	client := openai.NewClient(option.WithBaseURL(f.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	bad := strings.Join([]string{
		batchLine("a", "What is new?"),
		`{"custom_id": "b", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "sim-model", "messages": [`,
		`{"method": "POST", "url": "/v1/chat/completions", "body": {"model": "sim-model", "messages": [{"role": "user", "content": "x"}]}}`,
		batchLine("a", "duplicate id"),
		strings.Replace(batchLine("e", "x"), "/v1/chat/completions", "/v1/embeddings", 1),
		strings.Replace(batchLine("f", "x"), `"sim-model"`, `"gpt-17"`, 1),
		strings.Replace(batchLine("g", "x"), `"user"`, `"wizard"`, 1),
	}, "\n")
	_, err := client.Files.New(ctx, openai.FileNewParams{File: openai.File(strings.NewReader(bad), "bad.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("bad upload: %v", err)
	}
	for _, want := range []string{"6 invalid", "line 2:", "line 3:", "line 4:", "line 5:", "and 1 more"} {
		if !strings.Contains(apiErr.Message, want) {
			t.Errorf("error message lacks %q: %s", want, apiErr.Message)
		}
	}
	var full struct {
		Errors struct {
			Data []struct {
				Code  string  `json:"code"`
				Line  int     `json:"line"`
				Param *string `json:"param"`
			} `json:"data"`
		} `json:"errors"`
	}
	raw, _ := io.ReadAll(apiErr.Response.Body)
	json.Unmarshal(raw, &full)
	wantCodes := map[int]string{2: "invalid_json_line", 3: "missing_custom_id", 4: "duplicate_custom_id", 5: "invalid_url", 6: "model_not_found", 7: "invalid_request"}
	got := map[int]string{}
	for _, e := range full.Errors.Data {
		got[e.Line] = e.Code
	}
	if fmt.Sprint(got) != fmt.Sprint(wantCodes) {
		t.Errorf("line errors %v, want %v", got, wantCodes)
	}

	a := batchClient{t: t, url: f.URL}
	status, body := a.do("POST", "/v1/batches", map[string]any{"queries": []string{"fine?", " ", "also fine?"}, "model": demo.Model})
	if status != 400 || !strings.Contains(string(body), "line 2: queries[1] is empty") {
		t.Errorf("blank query: %d %s", status, body)
	}
	status, body = a.do("POST", "/v1/batches", map[string]any{"queries": []string{"fine?"}, "model": "gpt-17"})
	if status != 400 || !strings.Contains(string(body), "model_not_found") {
		t.Errorf("unknown model: %d %s", status, body)
	}
	status, body = a.do("POST", "/v1/batches", map[string]any{"input_file_id": "file-nosuchfile", "endpoint": "/v1/chat/completions", "completion_window": "24h"})
	if status != 404 {
		t.Errorf("unknown file: %d %s", status, body)
	}
	status, body = a.do("POST", "/v1/batches", map[string]any{"queries": []string{"x?"}, "endpoint": "/v1/embeddings"})
	if status != 400 {
		t.Errorf("unsupported endpoint: %d %s", status, body)
	}
	if _, body := a.do("GET", "/v1/batches", nil); !strings.Contains(string(body), `"data":[]`) {
		t.Errorf("refused batches were created: %s", body)
	}
	if _, body := a.do("GET", "/v1/files", nil); !strings.Contains(string(body), `"data":[]`) {
		t.Errorf("refused inputs were stored: %s", body)
	}
	if n := f.Sim.Stats().Requests["model"]; n != 0 {
		t.Errorf("refused batches reached the model %d times", n)
	}
}

// Cancelling a running batch stops it: the unfinished jobs are cancelled, the batch
// ends cancelled with partial counts, and every line is in the output or error file.
func TestBatchCancel(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	a := batchClient{t: t, url: f.URL}
	var qs, ids []string
	for i := range 40 {
		qs = append(qs, fmt.Sprintf("What is the news about topic %d? sim:model-slow=150ms", i))
		ids = append(ids, fmt.Sprintf("q-%d", i+1))
	}
	status, body := a.do("POST", "/v1/batches", map[string]any{"queries": qs, "model": demo.Model})
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var b batchObject
	json.Unmarshal(body, &b)
	pollUntil(t, time.Minute, "a first line to complete", func() bool { return a.batch(b.ID).RequestCounts.Completed > 0 })
	status, body = a.do("POST", "/v1/batches/"+b.ID+"/cancel", nil)
	if status != 200 || !strings.Contains(string(body), `"status":"cancelling"`) {
		t.Fatalf("cancel: %d %s", status, body)
	}
	b = a.waitBatch(b.ID, time.Minute)
	c := b.RequestCounts
	if b.Status != "cancelled" || c.Completed == 0 || c.Completed >= 40 || c.Failed != 0 || c.Total != 40 {
		t.Fatalf("cancelled batch %+v", b)
	}
	out, errs := accountFor(t, a, b, ids)
	if len(out) != c.Completed {
		t.Errorf("%d output lines for %d completed", len(out), c.Completed)
	}
	for _, l := range errs {
		if l.Error == nil || l.Error.Code != "batch_cancelled" {
			t.Errorf("error line %+v", l)
		}
	}
	calls := f.Sim.Stats().Requests["model"]
	time.Sleep(500 * time.Millisecond) // anything still running would call the model again
	if n := f.Sim.Stats().Requests["model"]; n > calls {
		t.Errorf("the model was called %d more times after the batch was cancelled", n-calls)
	}
	if status, _ := a.do("POST", "/v1/batches/"+b.ID+"/cancel", nil); status != 200 {
		t.Errorf("cancelling again: %d", status)
	}
}

// A tenant sees only its own files and batches.
func TestBatchTenants(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.File(func(c *config.File) {
		c.Tenants = []config.Tenant{{ID: "alice", APIKeyEnv: "BATCHTEST_KEY_A", APIKeys: []string{"key-alice"}}, {ID: "bob", APIKeyEnv: "BATCHTEST_KEY_B", APIKeys: []string{"key-bob"}}}
	}))
	alice, bob := batchClient{t: t, url: f.URL, key: "key-alice"}, batchClient{t: t, url: f.URL, key: "key-bob"}
	status, body := alice.do("POST", "/v1/batches", map[string]any{"queries": []string{"What is new today?"}, "model": demo.Model})
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var b struct {
		ID          string `json:"id"`
		InputFileID string `json:"input_file_id"`
	}
	json.Unmarshal(body, &b)
	done := alice.waitBatch(b.ID, time.Minute)
	for _, req := range [][2]string{
		{"GET", "/v1/batches/" + b.ID}, {"POST", "/v1/batches/" + b.ID + "/cancel"},
		{"GET", "/v1/files/" + b.InputFileID}, {"GET", "/v1/files/" + b.InputFileID + "/content"},
		{"GET", "/v1/files/" + done.OutputFileID + "/content"}, {"DELETE", "/v1/files/" + b.InputFileID},
	} {
		if status, body := bob.do(req[0], req[1], nil); status != 404 {
			t.Errorf("bob %s %s: %d %s", req[0], req[1], status, body)
		}
	}
	for _, p := range []string{"/v1/batches", "/v1/files"} {
		if _, body := bob.do("GET", p, nil); !strings.Contains(string(body), `"data":[]`) {
			t.Errorf("bob lists alice's objects at %s: %s", p, body)
		}
	}
	if status, _ := bob.do("POST", "/v1/batches", map[string]any{"input_file_id": b.InputFileID, "endpoint": "/v1/chat/completions", "completion_window": "24h"}); status != 404 {
		t.Errorf("bob ran alice's file: %d", status)
	}
	if status, _ := (batchClient{t: t, url: f.URL}).do("GET", "/v1/batches/"+b.ID, nil); status != 401 {
		t.Errorf("no key: %d", status)
	}
	if status, _ := alice.do("GET", "/v1/files/"+done.OutputFileID+"/content", nil); status != 200 {
		t.Errorf("alice reading her output: %d", status)
	}
}

// A 2,000-query batch through the simulator accounts for every line: completed +
// failed == 2000, and every custom_id once in the output or error file.
func TestBatchOf2000(t *testing.T) {
	if testing.Short() {
		t.Skip("a 2,000-line batch: skipped in -short mode")
	}
	t.Parallel()
	f := fleettest.Start(t)
	a := batchClient{t: t, url: f.URL}
	const n = 2000
	qs, ids := make([]string, n), make([]string, n)
	for i := range n {
		qs[i] = fmt.Sprintf("Find the latest news about subject %d", i)
		if i%100 == 7 {
			qs[i] = fmt.Sprintf("Subject %d sim:model-500", i) // fails after its retries
		}
		ids[i] = fmt.Sprintf("q-%d", i+1)
	}
	start := time.Now()
	status, body := a.do("POST", "/v1/batches", map[string]any{"queries": qs, "model": demo.Model})
	if status != 200 {
		t.Fatalf("%d %.300s", status, body)
	}
	var b batchObject
	json.Unmarshal(body, &b)
	b = a.waitBatch(b.ID, 8*time.Minute)
	t.Logf("2,000 lines in %s", time.Since(start).Round(time.Millisecond))
	c := b.RequestCounts
	if b.Status != "completed" || c.Total != n || c.Completed+c.Failed != n || c.Failed != 20 {
		t.Fatalf("batch %+v", b)
	}
	out, errs := accountFor(t, a, b, ids)
	if len(out) != c.Completed || len(errs) != c.Failed {
		t.Errorf("%d output / %d error lines for %d completed / %d failed", len(out), len(errs), c.Completed, c.Failed)
	}
}

// restartable is a fleet whose processes can be stopped and started again on the
// same NATS server and Redis prefix.
type restartable struct {
	t    *testing.T
	env  config.Env
	file *config.File
	rdb  redis.UniversalClient
	stop func()
	url  string
}

// startFleet runs one fleet process (all roles) until stopFleet or the test's end.
func (r *restartable) startFleet() {
	r.t.Helper()
	r.url, r.stop = fleettest.Run(r.t, r.env, r.file, r.rdb)
}

// stopFleet stops the running fleet process; with the test's 1 ms drain timeout its
// work is cut off, not finished.
func (r *restartable) stopFleet() {
	if r.stop != nil {
		r.stop()
		r.stop = nil
	}
}

// A fleet stopped in the middle of expanding a batch loses nothing: another fleet on
// the same NATS and Redis takes the expansion over from its cursor and the batch
// completes with every line exactly once.
func TestBatchExpansionSurvivesRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("a restart in the middle of a big batch: skipped in -short mode")
	}
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	sim := simulator.New(simulator.Options{})
	hs, simURL, err := sim.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close() })
	env := fleettest.Settings()
	env.NATSURL, env.KeyPrefix = bustest.Server(t), prefix
	env.DrainTimeout = time.Millisecond // the stop cuts the expansion off mid-chunk
	env.BatchConcurrency = 32
	r := &restartable{t: t, env: env, file: demo.Config(simURL, sim.EngineConfigs(simURL)), rdb: rdb}
	r.startFleet()

	const n = 3000
	qs, ids := make([]string, n), make([]string, n)
	for i := range n {
		qs[i], ids[i] = fmt.Sprintf("What is new about item %d? sim:nosearch", i), fmt.Sprintf("q-%d", i+1)
	}
	a := batchClient{t: t, url: r.url}
	status, body := a.do("POST", "/v1/batches", map[string]any{"queries": qs, "model": demo.Model})
	if status != 200 {
		t.Fatalf("%d %.300s", status, body)
	}
	var b batchObject
	json.Unmarshal(body, &b)
	jobs := fleettest.Store(t, rdb, prefix, env.NATSURL, "", 0)
	exists := func(line int) bool {
		_, err := jobs.Jobs.JobStatus(t.Context(), fmt.Sprintf("%s_%d", b.ID, line))
		return err == nil
	}
	for deadline := time.Now().Add(time.Minute); !exists(0); time.Sleep(time.Millisecond) { // a tight poll: stop early in the expansion
		if time.Now().After(deadline) {
			t.Fatal("the expansion did not start")
		}
	}
	r.stopFleet()
	if exists(n - 1) {
		t.Fatal("expansion finished before the fleet was stopped; the test proves nothing")
	}

	r.startFleet()
	a.url = r.url
	b = a.waitBatch(b.ID, 5*time.Minute)
	if c := b.RequestCounts; b.Status != "completed" || c.Completed != n || c.Failed != 0 {
		t.Fatalf("batch after the restart %+v", b)
	}
	out, _ := accountFor(t, a, b, ids)
	answered := map[string]bool{}
	for _, l := range out {
		if answered[l.Response.RequestID] {
			t.Errorf("job %s answers two lines", l.Response.RequestID)
		}
		answered[l.Response.RequestID] = true
	}
}

// A batch with a callback is announced when it ends: one signed "batch.completed"
// delivery carrying the batch object, verifiable with the secret its creation
// returned; the batch then shows the delivery as delivered.
func TestBatchWebhook(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	got := make(chan *http.Request, 4)
	bodies := make(chan []byte, 4)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r
		bodies <- b
	}))
	t.Cleanup(hook.Close)
	a := batchClient{t: t, url: f.URL}
	status, body := a.do("POST", "/v1/batches", map[string]any{"queries": []string{"Find the latest news about Go"}, "model": demo.Model,
		"callback": map[string]any{"url": hook.URL + "/batch-done"}})
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var created struct {
		ID            string `json:"id"`
		WebhookSecret string `json:"webhook_secret"`
	}
	json.Unmarshal(body, &created)
	if !strings.HasPrefix(created.WebhookSecret, "whsec_") {
		t.Fatalf("no signing secret in %s", body)
	}
	var r *http.Request
	var payload []byte
	select {
	case r = <-got:
		payload = <-bodies
	case <-time.After(time.Minute):
		t.Fatal("no webhook within a minute")
	}
	wh, err := standardwebhooks.NewWebhook(created.WebhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(payload, r.Header); err != nil {
		t.Errorf("delivery does not verify: %v", err)
	}
	var p struct {
		Type string `json:"type"`
		Data struct {
			ID            string                  `json:"id"`
			Status        string                  `json:"status"`
			OutputFileID  string                  `json:"output_file_id"`
			RequestCounts struct{ Completed int } `json:"request_counts"`
		} `json:"data"`
	}
	json.Unmarshal(payload, &p)
	if p.Type != "batch.completed" || p.Data.ID != created.ID || p.Data.Status != "completed" || p.Data.OutputFileID == "" || p.Data.RequestCounts.Completed != 1 {
		t.Errorf("payload %s", payload)
	}
	if id := r.Header.Get("webhook-id"); id != "msg_"+created.ID+"_completed" {
		t.Errorf("webhook-id %q", id)
	}
	pollUntil(t, 20*time.Second, "the batch to show its webhook delivered", func() bool {
		_, b := a.do("GET", "/v1/batches/"+created.ID, nil)
		return strings.Contains(string(b), `"webhook_status":"delivered"`)
	})
	select {
	case <-got:
		t.Error("the webhook was delivered twice")
	case <-time.After(300 * time.Millisecond):
	}
}
