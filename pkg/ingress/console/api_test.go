package console_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/config"
)

// tenantFleet is a whole fleet with two tenants, acme and globex.
func tenantFleet(t *testing.T) *fleettest.Fleet {
	return fleettest.Start(t, fleettest.File(func(f *config.File) {
		f.Tenants = []config.Tenant{
			{ID: "acme", APIKeyEnv: "ACME_KEY", APIKeys: []string{"sk-acme"}},
			{ID: "globex", APIKeyEnv: "GLOBEX_KEY", APIKeys: []string{"sk-globex"}},
		}
	}))
}

func as(t *testing.T, f *fleettest.Fleet, key, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequestWithContext(t.Context(), method, f.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	out.ReadFrom(resp.Body)
	return resp.StatusCode, out.Bytes()
}

func ask(q string) map[string]any {
	return map[string]any{"model": demo.Model, "messages": []any{map[string]any{"role": "user", "content": q}}}
}

// eventually polls cond every 100 ms for up to a minute.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// GET /v1/jobs lists the calling tenant's own jobs, newest first, with the question
// and cost; GET /v1/usage/daily counts them per day and model once they end; GET
// /v1/engines shows the engine that searched, in shares, not counts. Nothing of another tenant shows.
func TestConsoleReadRoutes(t *testing.T) {
	t.Parallel()
	f := tenantFleet(t)
	var ids []string
	for _, q := range []string{"Search the web for the latest news about NATS JetStream", "Search the web for <b>Redis</b> news"} {
		status, b := as(t, f, "sk-acme", "POST", "/v1/jobs", ask(q))
		if status != http.StatusAccepted {
			t.Fatalf("submit: %d %s", status, b)
		}
		var j struct{ ID string }
		json.Unmarshal(b, &j)
		ids = append(ids, j.ID)
	}
	status, b := as(t, f, "sk-globex", "POST", "/v1/jobs", ask("Search the web for globex secrets"))
	if status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", status, b)
	}

	type summary struct {
		ID, Status, Question string
		CostUSD              float64 `json:"cost_usd"`
		Searches             int
	}
	var list struct {
		Data    []summary
		HasMore bool `json:"has_more"`
	}
	eventually(t, "acme's jobs to complete", func() bool {
		_, b := as(t, f, "sk-acme", "GET", "/v1/jobs", nil)
		list.Data = nil
		json.Unmarshal(b, &list)
		done := 0
		for _, j := range list.Data {
			if j.Status == "completed" {
				done++
			}
		}
		return done == 2
	})
	if len(list.Data) != 2 || list.Data[0].ID != ids[1] || list.Data[1].ID != ids[0] {
		t.Fatalf("acme's list = %+v, want its two jobs, newest first (%v)", list.Data, ids)
	}
	if j := list.Data[0]; j.Question != "Search the web for <b>Redis</b> news" || j.Searches < 1 || j.CostUSD <= 0 {
		t.Fatalf("summary = %+v, want the question as sent, its searches and cost", j)
	}
	total := list.Data[0].CostUSD + list.Data[1].CostUSD
	if status, b := as(t, f, "sk-acme", "GET", "/v1/jobs/"+ids[1]+"/request", nil); status != http.StatusOK ||
		!strings.Contains(string(b), `"question":"Search the web for \u003cb\u003eRedis\u003c/b\u003e news"`) {
		t.Errorf("GET /v1/jobs/{id}/request = %d %s, want the question", status, b)
	}
	if status, _ := as(t, f, "sk-globex", "GET", "/v1/jobs/"+ids[1]+"/request", nil); status != http.StatusNotFound {
		t.Errorf("globex read acme's request: %d", status)
	}
	_, b = as(t, f, "sk-acme", "GET", "/v1/jobs?limit=1", nil)
	list.Data = nil
	json.Unmarshal(b, &list)
	if len(list.Data) != 1 || !list.HasMore {
		t.Fatalf("limit=1 page = %s", b)
	}
	_, b = as(t, f, "sk-acme", "GET", "/v1/jobs?limit=1&after="+ids[1], nil)
	list.Data = nil
	json.Unmarshal(b, &list)
	if len(list.Data) != 1 || list.Data[0].ID != ids[0] || list.HasMore {
		t.Fatalf("second page = %s", b)
	}
	for _, q := range []string{"limit=0", "limit=101", "limit=x", "after=../x"} {
		if status, b := as(t, f, "sk-acme", "GET", "/v1/jobs?"+q, nil); status != http.StatusBadRequest || !strings.Contains(string(b), `"invalid_request_error"`) {
			t.Errorf("GET /v1/jobs?%s = %d %s, want 400 in the API's error shape", q, status, b)
		}
	}
	if status, _ := as(t, f, "sk-nobody", "GET", "/v1/jobs", nil); status != http.StatusUnauthorized {
		t.Errorf("an unknown key listed jobs: %d", status)
	}
	_, b = as(t, f, "sk-globex", "GET", "/v1/jobs", nil)
	if strings.Contains(string(b), ids[0]) || strings.Contains(string(b), ids[1]) || !strings.Contains(string(b), "globex secrets") {
		t.Fatalf("globex's list shows acme's jobs or lacks its own: %s", b)
	}

	var daily struct {
		Data []struct {
			Day, Model     string
			SpentUSD       float64 `json:"spent_usd"`
			Jobs, Searches int
		}
	}
	eventually(t, "the finish hook to count acme's jobs", func() bool {
		_, b := as(t, f, "sk-acme", "GET", "/v1/usage/daily?days=2", nil)
		daily.Data = nil
		json.Unmarshal(b, &daily)
		return len(daily.Data) == 1 && daily.Data[0].Jobs == 2
	})
	if d := daily.Data[0]; d.Model != demo.Model || d.Day != time.Now().UTC().Format(time.DateOnly) || d.Searches < 2 ||
		fmt.Sprintf("%.6f", d.SpentUSD) != fmt.Sprintf("%.6f", total) {
		t.Fatalf("acme's spend = %+v, want today's two %s jobs", d, demo.Model)
	}
	if status, _ := as(t, f, "sk-acme", "GET", "/v1/usage/daily?days=36", nil); status != http.StatusBadRequest {
		t.Errorf("days=36 = %d, want 400", status)
	}

	_, b = as(t, f, "sk-acme", "GET", "/v1/engines", nil)
	var engines struct {
		Data []struct {
			ID         string
			Outcomes   map[string]float64
			LatencyP50 *float64 `json:"latency_p50_ms"`
		}
	}
	json.Unmarshal(b, &engines)
	searched := false
	for _, e := range engines.Data {
		if e.Outcomes["ok"] > 0 && e.Outcomes["ok"] <= 1 && e.LatencyP50 != nil {
			searched = true
		}
	}
	if !searched || strings.Contains(string(b), "acme") || strings.Contains(string(b), "globex") || strings.Contains(string(b), `"searches"`) || strings.Contains(string(b), `"errors"`) {
		t.Fatalf("engines = %s, want the engine that ran the three searches, as shares: no tenant, no volume", b)
	}
}

// The console's pages are served under /console/ without a key (the page asks for
// one), with a policy that allows this origin's scripts only; /console redirects there.
func TestConsolePages(t *testing.T) {
	t.Parallel()
	f := tenantFleet(t)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(f.URL + "/console")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode/100 != 3 || loc != "/console/" {
		t.Fatalf("GET /console = %d Location %q, want a redirect to /console/", resp.StatusCode, loc)
	}
	for path, want := range map[string]string{"/console/": "text/html", "/console/app.js": "text/javascript", "/console/style.css": "text/css"} {
		resp, err := http.Get(f.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, want) ||
			!strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("GET %s = %d %s CSP %q", path, resp.StatusCode, ct, resp.Header.Get("Content-Security-Policy"))
		}
	}
	if status, _ := as(t, f, "", "GET", "/console/missing.js", nil); status != http.StatusNotFound {
		t.Errorf("GET /console/missing.js = %d, want 404", status)
	}
}

// GET /v1/batches/{id}/events streams the batch object as it progresses and ends with
// the batch ended; another tenant's batch is a 404.
func TestBatchProgressEvents(t *testing.T) {
	t.Parallel()
	f := tenantFleet(t)
	status, b := as(t, f, "sk-acme", "POST", "/v1/batches", map[string]any{"model": demo.Model,
		"queries": []string{"Search the web for NATS news", "Search the web for Redis news", "Search the web for Go news"}})
	if status != http.StatusOK {
		t.Fatalf("create batch: %d %s", status, b)
	}
	var batch struct{ ID string }
	json.Unmarshal(b, &batch)

	if status, _ := as(t, f, "sk-globex", "GET", "/v1/batches/"+batch.ID+"/events", nil); status != http.StatusNotFound {
		t.Fatalf("globex followed acme's batch: %d", status)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", f.URL+"/v1/batches/"+batch.ID+"/events", nil)
	req.Header.Set("Authorization", "Bearer sk-acme")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, ct)
	}
	type view struct {
		ID, Status    string
		RequestCounts struct{ Total, Completed, Failed int } `json:"request_counts"`
	}
	var seen []view
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	event := ""
	for sc.Scan() { // the stream ends by itself once the batch has ended
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if event != "batch" {
				t.Fatalf("event %q, want batch", event)
			}
			var v view
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &v); err != nil {
				t.Fatal(err)
			}
			seen = append(seen, v)
		}
	}
	if len(seen) == 0 {
		t.Fatal("no batch events")
	}
	last := seen[len(seen)-1]
	if last.ID != batch.ID || last.Status != "completed" || last.RequestCounts.Completed != 3 || last.RequestCounts.Total != 3 {
		t.Fatalf("last event = %+v, want the batch completed with 3 of 3", last)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] == seen[i-1] {
			t.Fatalf("event %d repeats the one before: %+v", i, seen[i])
		}
	}
}
