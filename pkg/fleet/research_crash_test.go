package fleet_test

import (
	"encoding/json"
	"net/http"
	"slices"
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

// A cancel whose process dies between recording it and publishing its step still
// ends the run cancelled and tells its callback, once: the run waits for its plan's
// approval, so no step of its own would come again, and the reaper's sweep publishes
// the cancel's step the dead process did not.
func TestResearchCancelSurvivesACrashBeforeItsStep(t *testing.T) {
	t.Parallel()
	var crashed atomic.Int32
	f := fleettest.Start(t, fleettest.Failpoint(func(name string) {
		if name == "research.cancel_recorded" && crashed.Add(1) == 1 {
			panic("failpoint " + name + ": the process dies")
		}
	}))
	rcv := newReceiver(t, func(int) int { return http.StatusOK })
	code, b, _ := f.Do(t, http.MethodPost, "/v1/research", map[string]any{"input": "How do rivers freeze?", "model": "research/sim-model", "effort": "low", "plan": "review",
		"callback": map[string]any{"url": rcv.URL}})
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
	waitResearch(t, f, created.ID, func(r researchRun) bool { return r.Status == "requires_action" })
	researchWebhook(t, rcv, "research.requires_action")
	if code, b, _ := f.Do(t, http.MethodPost, "/v1/research/"+created.ID+"/cancel", nil); code != http.StatusInternalServerError || crashed.Load() != 1 {
		t.Fatalf("the cancel did not die at its failpoint: %d %s", code, b)
	}
	if r := getResearch(t, f, created.ID); r.Status != "cancelled" {
		t.Fatalf("the cancel was not recorded: %+v", r)
	}
	researchWebhook(t, rcv, "research.cancelled")
	time.Sleep(2 * f.Env.AckWait) // any second delivery would have come by now
	want := []string{webhook.MessageID(created.ID, "requires_action"), webhook.MessageID(created.ID, "cancelled")}
	if ids := rcv.verify(t, created.WebhookSecret); !slices.Equal(ids, want) {
		t.Fatalf("deliveries %v, want %v", ids, want)
	}
}
