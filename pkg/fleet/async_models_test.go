package fleet_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/h2async"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/fleet"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// Against an HTTPS provider (HTTP/2, as real ones are), a model call waiting for its
// answer holds no goroutine of the fleet's: the chat worker's step has returned, and
// h2async keeps the request as a struct. Measured on the goroutines themselves: while
// every call is out, next to none of them runs chat-worker or model-caller code, nor
// Go's net/http client (a few may be finishing other work: the searched job's
// steps, a heartbeat); with net/http it is two a call. The answers then complete every job, cited where it searched.
func TestModelCallsWaitWithoutGoroutines(t *testing.T) {
	// Not parallel: it counts the goroutines of the whole process, and other tests'
	// fleets run chat steps too.
	const n = 120
	rdb, prefix := testenv.Redis(t)
	sim := simulator.New(simulator.Options{ModelLatency: 2 * time.Second})
	ts := httptest.NewUnstartedServer(sim)
	ts.EnableHTTP2 = true
	ts.StartTLS()
	t.Cleanup(ts.Close)
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	hc := &http.Client{Transport: &h2async.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}

	env := fleettest.Settings()
	env.NATSURL, env.KeyPrefix = bustest.Server(t), prefix
	env.ChatConcurrency = n + 16
	file := demo.Config(ts.URL, sim.EngineConfigs(ts.URL))
	url, _ := fleettest.RunWith(t, env, file, rdb, func(o *fleet.Options) { o.HTTPClient = hc })
	f := &fleettest.Fleet{URL: url, Sim: sim}

	// A searched answer, model and engine both over HTTPS.
	status, resp := f.Chat(t, searchPrompt)
	if c := fleettest.Content(resp); status != http.StatusOK || !strings.Contains(c, "[1]") || !strings.Contains(c, searchQuote) {
		t.Fatalf("status %d, answer %q", status, c)
	}

	before := sim.Stats().Requests["model"]
	ids := make([]string, n)
	for i := range n {
		status, body, _ := f.Do(t, "POST", "/v1/jobs", map[string]any{"model": demo.Model,
			"messages": []any{map[string]any{"role": "user", "content": fmt.Sprintf("Hold %d, sim:nosearch", i)}}})
		var job struct{ ID string }
		if json.Unmarshal(body, &job); status != http.StatusAccepted || job.ID == "" {
			t.Fatalf("submit: %d %s", status, body)
		}
		ids[i] = job.ID
	}
	fleettest.Eventually(t, "every model call out", func() bool { return sim.Stats().Requests["model"]-before >= n })
	if waiting := fleetGoroutines(); waiting > n/10 {
		t.Fatalf("%d of the fleet's goroutines run chat, model-caller or net/http client code while %d model calls wait; want none a call", waiting, n)
	}
	for _, id := range ids {
		fleettest.Eventually(t, "job "+id+" completed", func() bool {
			_, b, _ := f.Do(t, "GET", "/v1/jobs/"+id, nil)
			var got struct{ Status string }
			json.Unmarshal(b, &got)
			return got.Status == "completed"
		})
	}
}

// fleetGoroutines counts the goroutines whose stack is in the chat worker, a model
// caller, or net/http's client (where a model call made with Complete waits).
func fleetGoroutines() int {
	buf := make([]byte, 16<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "searchfleet/pkg/chat.") || strings.Contains(g, "searchfleet/pkg/llm") ||
			strings.Contains(g, "net/http.(*Client).do") || strings.Contains(g, "net/http.(*http2clientStream).doRequest") {
			n++
		}
	}
	return n
}
