package fleet_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/config"
)

// The secrets the scanned fleet is configured with: none may reach a client.
const (
	scanKeyAlice    = "sk-scan-alice-7f3c9a1e5b"
	scanKeyBob      = "sk-scan-bob-2d8e4f6a0c"
	scanProviderKey = "sk-scan-provider-91b7e3d5"
	scanEngineKey   = "sk-scan-engine-c4a2f8e6"
	scanWebhookKey  = "whsec_scan0b1c2d3e4f5a6b7c8d9e0f1a2b3c"
)

// leakPatterns are what no client-visible body or header may contain: internal
// addresses and the transport's words for them, Go's names for types and values, and
// panics.
var leakPatterns = []*regexp.Regexp{
	regexp.MustCompile(`127\.0\.0\.1`),
	regexp.MustCompile(`(?i)localhost:\d`),
	regexp.MustCompile(`\[::1\]`),
	regexp.MustCompile(`\b10\.\d{1,3}\.\d{1,3}\.\d{1,3}\b`),
	regexp.MustCompile(`\b192\.168\.\d{1,3}\.\d{1,3}\b`),
	regexp.MustCompile(`dial tcp`),
	regexp.MustCompile(`lookup \S+ on `),
	regexp.MustCompile(`connect: connection refused`),
	regexp.MustCompile(`:6379\b`),
	regexp.MustCompile(`Go (struct|value)`),
	regexp.MustCompile(`json: cannot unmarshal`),
	regexp.MustCompile(`cannot unmarshal`),
	regexp.MustCompile(`\*errors\.`),
	regexp.MustCompile(`\bmain\.[A-Za-z]`),
	regexp.MustCompile(`\b(llm|wire|state|engines|bus|api|chat|jobs|batch|config|search|fleet|json|http|url|net|errors|fmt|webhook|intent)\.\*?[A-Z][A-Za-z]+`),
	regexp.MustCompile(`interface \{\}|\bmap\[string\]`),
	regexp.MustCompile(`(?i)goroutine \d|runtime error|panic:`),
}

// scanned is what one probe saw.
type scanned struct {
	status int
	header http.Header
	body   []byte
}

// leaks lists what s leaks, if anything.
func (s scanned) leaks(extra ...string) []string {
	var hdr strings.Builder
	for k, vs := range s.header {
		fmt.Fprintf(&hdr, "%s: %s\n", k, strings.Join(vs, ", "))
	}
	var out []string
	for _, text := range []string{hdr.String(), string(s.body)} {
		for _, re := range leakPatterns {
			if m := re.FindString(text); m != "" {
				out = append(out, fmt.Sprintf("%q (%s)", m, re))
			}
		}
		for _, secret := range append([]string{scanKeyAlice, scanKeyBob, scanProviderKey, scanEngineKey, scanWebhookKey, demo.Key}, extra...) {
			if strings.Contains(text, secret) {
				out = append(out, fmt.Sprintf("secret %q", secret))
			}
		}
	}
	return out
}

// deadAddr is a local address nothing listens on: connections are refused.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestNoErrorLeaks drives every endpoint with bad input of every class, and jobs that
// fail (a model whose provider is unreachable, engines that fail or cannot be reached)
// through every view of them, on a fleet with tenants and keys configured. No
// response body or header may name an internal address, a Go type or a secret.
func TestNoErrorLeaks(t *testing.T) {
	t.Parallel()
	dead := deadAddr(t)
	f := fleettest.Start(t, fleettest.File(func(c *config.File) {
		c.Tenants = []config.Tenant{
			{ID: "alice", APIKeyEnv: "SCAN_KEY_A", APIKeys: []string{scanKeyAlice}, WebhookSecretEnv: "SCAN_WH", WebhookSecret: scanWebhookKey},
			{ID: "bob", APIKeyEnv: "SCAN_KEY_B", APIKeys: []string{scanKeyBob}},
		}
		for name, p := range c.Providers {
			p.APIKey = scanProviderKey
			c.Providers[name] = p
		}
		c.Providers["dead"] = config.Provider{Kind: "openai", BaseURL: "http://" + dead + "/v1", APIKeyEnv: "SCAN_DEAD", APIKey: scanProviderKey}
		c.Models["dead-model"] = config.ModelRoute{Provider: "dead", Model: "gone"}
		for i := range c.WebSearch.Engines {
			c.WebSearch.Engines[i].APIKey = scanEngineKey
		}
		c.WebSearch.Engines = append(c.WebSearch.Engines, config.EngineEntry{ID: "deadengine", Kind: "brave", BaseURL: "http://" + dead,
			APIKeyEnv: "SCAN_DEAD_ENGINE", APIKey: scanEngineKey, Description: "an engine nothing answers for"})
	}))
	simHost := strings.TrimPrefix(f.SimURL, "http://")
	natsHost := strings.TrimPrefix(f.NATS, "nats://")
	extra := []string{simHost, natsHost, dead}

	do := func(method, path, ctype, key string, body []byte) scanned {
		t.Helper()
		req, err := http.NewRequest(method, f.URL+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("%s %s: %v", method, path, err)
			return scanned{}
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return scanned{status: resp.StatusCode, header: resp.Header, body: b}
	}
	check := func(name string, s scanned, wantError bool) {
		t.Helper()
		if wantError && s.status < 400 && !bytes.Contains(s.body, []byte(`"error"`)) {
			t.Errorf("%s: status %d is not an error: %.300s", name, s.status, s.body)
		}
		if s.status >= 500 && s.status != http.StatusServiceUnavailable && s.status != http.StatusBadGateway && s.status != http.StatusGatewayTimeout {
			t.Errorf("%s: status %d: %.300s", name, s.status, s.body)
		}
		if l := s.leaks(extra...); len(l) > 0 {
			t.Errorf("%s (%d) leaks %s:\n%.600s", name, s.status, strings.Join(l, ", "), s.body)
		}
	}

	const js = "application/json"
	huge := strings.Repeat("m", 1<<20)
	hugeModel := `{"model":"` + huge + `","messages":[{"role":"user","content":"hi"}]}`
	hugeModelMsgs := `{"model":"` + huge + `","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	hugeModelResp := `{"model":"` + huge + `","input":"hi"}`
	oversized := `{"model":"` + demo.Model + `","messages":[{"role":"user","content":"` + strings.Repeat("x", 5<<20) + `"}]}`
	longID := strings.Repeat("j", 60000)

	// Bad input of each class on each endpoint that takes input.
	type probe struct{ method, path, ctype, body string }
	bodies := map[string][]string{
		"/v1/chat/completions": {`{"model":`, `[1,2]`, `{}`, `{"model":5,"messages":"x"}`, `{"model":"` + demo.Model + `","messages":[{"role":5}]}`,
			`{"model":"` + demo.Model + `","stream":"yes","messages":[]}`,
			`{"model":"` + demo.Model + `","messages":[{"role":"user","content":"hi"}],"web_search_options":{"search_context_size":7}}`, hugeModel, oversized, "\x00\xff"},
		"/v1/jobs": {`{"model":`,
			`{"model":"` + demo.Model + `","messages":[{"role":"user","content":"hi"}],"callback":{"url":"http://internal.invalid/hook"}}`,
			`{"model":"` + demo.Model + `","messages":[{"role":"user","content":"hi"}],"callback":5}`, hugeModel, oversized},
		"/v1/responses": {`{"model":`, `{}`, `{"model":5}`, `{"model":"` + demo.Model + `","input":[{"role":5}]}`, `{"model":"` + demo.Model + `","input":[5]}`,
			`{"model":"` + demo.Model + `","input":"hi","tools":[{"type":"web_search","filters":{"allowed_domains":5}}]}`, hugeModelResp, oversized},
		"/v1/messages": {`{"model":`, `{}`, `{"model":"` + demo.Model + `","max_tokens":"x","messages":[]}`,
			`{"model":"` + demo.Model + `","max_tokens":10,"messages":[{"role":"user","content":5}]}`, hugeModelMsgs, oversized},
		"/v1/search": {`{"query":`, `{"query":5}`, `{"query":""}`, `{"query":"x","engine":"nope"}`, `{"query":"x","count":"ten"}`, `{"query":"` + huge + `"}`},
		"/v1/batches": {`{"input_file_id":5}`, `{"input_file_id":"file_nope","endpoint":"/v1/chat/completions","completion_window":"24h"}`,
			`{"queries":"x","model":"` + demo.Model + `"}`, `{"queries":["q"],"model":"` + huge + `"}`, `{"input_file_id":"x","endpoint":"/v2/nope","completion_window":"forever"}`},
	}
	var probes []probe
	for path, bs := range bodies {
		for _, b := range bs {
			probes = append(probes, probe{"POST", path, js, b})
		}
		probes = append(probes, probe{"POST", path, "text/plain", `{"model":"x"}`}, probe{"PUT", path, js, `{}`})
	}
	for _, p := range []string{"/v1/jobs/job_nope", "/v1/jobs/job_nope/events", "/v1/responses/resp_nope", "/v1/files/file_nope",
		"/v1/files/file_nope/content", "/v1/batches/batch_nope", "/v1/jobs/" + longID, "/v1/batches/" + longID, "/v1/files/" + longID, "/v1/nowhere"} {
		probes = append(probes, probe{"GET", p, "", ""})
	}
	probes = append(probes,
		probe{"POST", "/v1/jobs/job_nope/cancel", "", ""}, probe{"POST", "/v1/batches/batch_nope/cancel", "", ""},
		probe{"DELETE", "/v1/files/file_nope", "", ""}, probe{"DELETE", "/v1/models", "", ""},
		probe{"POST", "/v1/files", js, `{"file":"x"}`}, probe{"POST", "/v1/files", "multipart/form-data; boundary=zz", "--zz\r\nbroken"},
	)
	for _, p := range probes {
		name := p.method + " " + p.path + " " + clipForName(p.body)
		check(name, do(p.method, p.path, p.ctype, scanKeyAlice, []byte(p.body)), true)
	}
	// A multipart upload with a bad purpose and one without a file.
	for _, purpose := range []string{"fine-tune", ""} {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		if purpose != "" {
			mw.WriteField("purpose", purpose)
		}
		fw, _ := mw.CreateFormFile("file", "in.jsonl")
		fw.Write([]byte("{not json\n"))
		mw.Close()
		check("upload purpose="+purpose, do("POST", "/v1/files", mw.FormDataContentType(), scanKeyAlice, buf.Bytes()), true)
	}

	// Bad authentication, with tenants configured: no key, a wrong key, a huge key.
	for _, key := range []string{"", "sk-wrong", strings.Repeat("k", 60000), scanKeyAlice[:10]} {
		for _, ep := range []string{"/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/jobs", "/v1/search", "/v1/batches"} {
			check("auth "+ep+" key="+clipForName(key), do("POST", ep, js, key, []byte(`{"model":"`+demo.Model+`"}`)), true)
		}
		check("auth models key="+clipForName(key), do("GET", "/v1/models", "", key, nil), true)
		check("auth job key="+clipForName(key), do("GET", "/v1/jobs/job_nope", "", key, nil), true)
	}
	check("readyz", do("GET", "/readyz", "", "", nil), false)
	check("healthz", do("GET", "/healthz", "", "", nil), false)

	// Failures inside jobs: a model whose provider refuses connections (every
	// protocol, streamed or not), engines that fail (HTTP 500, unreachable) read by
	// the model, and direct searches on them.
	chat := func(model, text string, stream bool) string {
		b, _ := json.Marshal(map[string]any{"model": model, "stream": stream, "messages": []any{map[string]any{"role": "user", "content": text}}})
		return string(b)
	}
	failing := []probe{
		{"POST", "/v1/chat/completions", js, chat("dead-model", "hi", false)},
		{"POST", "/v1/chat/completions", js, chat("dead-model", "hi", true)},
		{"POST", "/v1/responses", js, `{"model":"dead-model","input":"hi"}`},
		{"POST", "/v1/responses", js, `{"model":"dead-model","input":"hi","stream":true}`},
		{"POST", "/v1/messages", js, `{"model":"dead-model","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`},
		{"POST", "/v1/messages", js, `{"model":"dead-model","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"POST", "/v1/chat/completions", js, chat(demo.Model, "Search the web: weather today sim:engine=deadengine", false)},
		{"POST", "/v1/chat/completions", js, chat(demo.Model, "Search the web: weather today sim:500", false)},
		{"POST", "/v1/chat/completions", js, chat(demo.Model, "Search the web: weather today sim:401", true)},
		{"POST", "/v1/search", js, `{"query":"weather today","engine":"deadengine"}`},
		{"POST", "/v1/search", js, `{"query":"weather today sim:500","engine":"google"}`},
		{"POST", "/v1/search", js, `{"query":"weather today sim:403","engine":"brave"}`},
	}
	// They run at once: a retried engine failure takes its whole retry schedule.
	jobIDs := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range failing {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := do(p.method, p.path, p.ctype, scanKeyAlice, []byte(p.body))
			check("failing "+p.path+" "+clipForName(p.body), s, false)
			if id := s.header.Get("X-Searchfleet-Job-Id"); id != "" {
				mu.Lock()
				jobIDs[id] = p.body
				mu.Unlock()
			}
		}()
	}
	// Async jobs that fail, then every view of every failed job.
	for _, body := range []string{chat("dead-model", "hi", false), chat(demo.Model, "Search the web: news today sim:engine=deadengine", false)} {
		s := do("POST", "/v1/jobs", js, scanKeyAlice, []byte(body))
		check("async "+clipForName(body), s, false)
		var j struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(s.body, &j) != nil || j.ID == "" {
			t.Fatalf("async job not accepted: %d %s", s.status, s.body)
		}
		mu.Lock()
		jobIDs[j.ID] = body
		mu.Unlock()
	}
	wg.Wait()
	if len(jobIDs) < 8 {
		t.Fatalf("only %d job ids seen", len(jobIDs))
	}
	for id := range jobIDs {
		for deadline := time.Now().Add(90 * time.Second); ; {
			s := do("GET", "/v1/jobs/"+id, "", scanKeyAlice, nil)
			var j struct {
				Status string `json:"status"`
			}
			json.Unmarshal(s.body, &j)
			if j.Status == "completed" || j.Status == "failed" || j.Status == "cancelled" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s (%s) has not ended: %s", id, jobIDs[id], s.body)
			}
			time.Sleep(50 * time.Millisecond)
		}
		for _, v := range []string{"/v1/jobs/" + id, "/v1/jobs/" + id + "/events", "/v1/responses/" + id} {
			check("view "+v, do("GET", v, "", scanKeyAlice, nil), false)
		}
		check("cancel ended "+id, do("POST", "/v1/jobs/"+id+"/cancel", "", scanKeyAlice, nil), true)
		check("bob views "+id, do("GET", "/v1/jobs/"+id, "", scanKeyBob, nil), true)
	}
	// The unreachable model failed its jobs (rather than leaking by answering).
	failed := 0
	for id, body := range jobIDs {
		if strings.Contains(body, "dead-model") {
			s := do("GET", "/v1/jobs/"+id, "", scanKeyAlice, nil)
			if bytes.Contains(s.body, []byte(`"status":"failed"`)) {
				failed++
			}
		}
	}
	if failed < 3 {
		t.Errorf("only %d jobs of the unreachable model failed", failed)
	}
}

func clipForName(s string) string {
	if len(s) > 60 {
		return s[:60] + fmt.Sprintf("…(%d B)", len(s))
	}
	return s
}
