package fleet_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/webhook"
)

// A worker that dies between recording a run's end and queueing its callback's
// delivery loses no webhook: the step is redelivered, finds the end not yet told,
// and queues the delivery, once, signed with the run's secret.
func TestResearchWebhookSurvivesACrashAfterTheEnd(t *testing.T) {
	t.Parallel()
	var crashed atomic.Int32
	f := fleettest.Start(t, fleettest.Failpoint(func(name string) {
		if name == "research.after_end" && crashed.Add(1) == 1 {
			panic("failpoint " + name + ": the worker dies")
		}
	}))
	rcv := newReceiver(t, func(int) int { return http.StatusOK })
	code, b, _ := f.Do(t, http.MethodPost, "/v1/research", map[string]any{"input": "Why do leaves turn red?", "model": "research/sim-model", "effort": "low",
		"callback": map[string]any{"url": rcv.URL, "events": []string{"completed", "failed"}}})
	if code != http.StatusAccepted {
		t.Fatalf("POST /v1/research: %d %s", code, b)
	}
	var created struct {
		ID            string `json:"id"`
		WebhookSecret string `json:"webhook_secret"`
	}
	if err := json.Unmarshal(b, &created); err != nil || created.WebhookSecret == "" {
		t.Fatalf("run: %s", b)
	}
	if r := waitResearch(t, f, created.ID, ended); r.Status != "completed" {
		t.Fatalf("run: %+v", r)
	}
	if crashed.Load() == 0 {
		t.Fatal("the run ended without passing its failpoint")
	}
	researchWebhook(t, rcv, "research.completed")
	time.Sleep(2 * f.Env.AckWait) // any second delivery would have come by now
	ids := rcv.verify(t, created.WebhookSecret)
	if len(ids) != 1 || ids[0] != webhook.MessageID(created.ID, "completed") {
		t.Fatalf("deliveries %v, want one of %s", ids, webhook.MessageID(created.ID, "completed"))
	}
	if d := rcv.deliveries()[0]; !strings.Contains(string(d.body), `"status":"completed"`) {
		t.Fatalf("delivery: %s", d.body)
	}
}
