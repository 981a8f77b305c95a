package fleet_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/search"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// The ingress writes a keyed submission in three steps: claim the Idempotency-Key
// (bound to a job id and the request's hash), record the job, publish it. A crash
// between two steps leaves exactly the state these tests build by hand; the client's
// retry must then complete the same submission: one job, run once, answered.

// requestHash is how the ingress binds a key to a request body.
func requestHash(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:16])
}

func jobBody(t *testing.T, text string, callback any) []byte {
	t.Helper()
	v := map[string]any{"model": demo.Model, "messages": []any{user(text)}}
	if callback != nil {
		v["callback"] = callback
	}
	b, _ := json.Marshal(v)
	return b
}

func completes(t *testing.T, f *fleettest.Fleet, id string) {
	t.Helper()
	fleettest.Eventually(t, "job "+id+" to complete", func() bool {
		j, err := f.Store.Jobs.GetJob(t.Context(), id)
		return err == nil && j.Status == state.Completed
	})
}

// Window 1: the key was claimed, then the ingress died before recording the job. The
// key used to stay poisoned (409 idempotency_key_in_use for the whole retention).
func TestRetryCompletesASubmissionKilledAfterTheClaim(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	body := jobBody(t, "Search the web for the news about NATS", nil)
	won, _, _, err := f.Store.Jobs.ClaimIdempotency(t.Context(), "default", "k-claimed", "job_claimedonly0000000000000", requestHash(body), time.Hour)
	if err != nil || !won {
		t.Fatalf("claim: %v %v", won, err)
	}
	status, v, h := postJob(t, f, "k-claimed", body)
	if status != http.StatusAccepted || v["id"] != "job_claimedonly0000000000000" || h.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d %v (replayed %q), want 202 for the claimed job", status, v, h.Get("Idempotent-Replayed"))
	}
	completes(t, f, "job_claimedonly0000000000000")
	if n := f.Sim.Stats().Requests["model"]; n != 2 {
		t.Errorf("model called %d times, want 2 (one job, two hops)", n)
	}
}

// Window 2: the job was recorded, then the ingress died before publishing it. The
// retry used to replay the queued record without publishing: the job never ran.
func TestRetryPublishesASubmissionKilledAfterTheRecord(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	body := jobBody(t, "Search the web for the news about Redis", nil)
	id := "job_recordedonly000000000000"
	if won, _, _, err := f.Store.Jobs.ClaimIdempotency(t.Context(), "default", "k-recorded", id, requestHash(body), time.Hour); err != nil || !won {
		t.Fatalf("claim: %v %v", won, err)
	}
	req, err := openaichat.Client.DecodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	chatBody, err := wire.EncodeStored(wire.OpenAIChat, req) // as the ingress stores it
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if err := f.Store.Jobs.CreateJob(t.Context(), &state.Job{ID: id, Tenant: "default", Kind: "chat", Model: demo.Model, Request: chatBody, Created: now, Deadline: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	status, v, _ := postJob(t, f, "k-recorded", body)
	if status != http.StatusAccepted || v["id"] != id {
		t.Fatalf("retry: %d %v", status, v)
	}
	completes(t, f, id)
	// A further retry finds the job running or ended and publishes nothing again.
	if status, v, _ := postJob(t, f, "k-recorded", body); status != http.StatusAccepted || v["id"] != id {
		t.Fatalf("second retry: %d %v", status, v)
	}
	if n := f.Sim.Stats().Requests["model"]; n != 2 {
		t.Errorf("model called %d times, want 2", n)
	}
}

// The per-job webhook secret used to be shown only in the first 202: a client whose
// first answer was lost could never verify its webhooks.
func TestReplayReturnsTheWebhookSecretAgain(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	rcv := newReceiver(t, func(int) int { return http.StatusOK })
	body := jobBody(t, "Find the latest news about AI", map[string]any{"url": rcv.URL, "events": []string{"completed", "failed"}})
	status, first, _ := postJob(t, f, "k-secret", body)
	sec, _ := first["webhook_secret"].(string)
	if status != http.StatusAccepted || sec == "" {
		t.Fatalf("first: %d %v", status, first)
	}
	status, again, h := postJob(t, f, "k-secret", body)
	if status != http.StatusAccepted || again["id"] != first["id"] || again["webhook_secret"] != sec || h.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v, want the same job and secret", status, again)
	}
	id, _ := first["id"].(string)
	completes(t, f, id)
	fleettest.Eventually(t, "the webhook", func() bool { return len(rcv.deliveries()) == 1 })
	if ids := rcv.verify(t, sec); len(ids) != 1 {
		t.Fatalf("deliveries %v", ids)
	}
	job, _ := f.Store.Jobs.GetJob(t.Context(), id)
	raw, _ := json.Marshal(job)
	if strings.Contains(string(raw), sec) {
		t.Fatal("the job record holds the signing secret")
	}
}

// A refused request burns no key: it is validated before the key is claimed.
func TestRefusedRequestDoesNotClaimItsKey(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Env(func(e *config.Env) { e.WebhookAllow = nil }))
	bad := jobBody(t, "hello", map[string]any{"url": "http://127.0.0.1:9/hook"})
	for i := range 2 {
		start := time.Now()
		status, v, _ := postJob(t, f, "k-refused", bad)
		if status != http.StatusBadRequest {
			t.Fatalf("attempt %d: %d %v, want 400 (private callback)", i+1, status, v)
		}
		if time.Since(start) > 2*time.Second {
			t.Fatalf("attempt %d waited for a claim", i+1)
		}
	}
	good := jobBody(t, "hello", nil)
	if status, v, _ := postJob(t, f, "k-refused", good); status != http.StatusAccepted {
		t.Fatalf("the key was burned by a refused request: %d %v", status, v)
	}
}

// Redis restarted empty: a search for a job it does not know is counted, dead-lettered
// with its reason, and never paid for.
func TestOrphanedSearchIsDeadLetteredUnpaid(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	b := bustest.Connect(t, f.NATS)
	before := f.Sim.Stats().Requests["brave"]
	req := search.Request{JobID: "job_lostinredis00000000000000", Hop: 0, CallID: "c1", Engine: "brave", Query: engines.Query{Query: "nats"}}
	if err := b.Publish(t.Context(), bus.SubjectSearchOf("brave", bus.BandSync, "default"), req); err != nil {
		t.Fatal(err)
	}
	fleettest.Eventually(t, "the orphan to be counted", func() bool {
		_, body, _ := f.Do(t, "GET", "/metrics", nil)
		return strings.Contains(string(body), `fleet_orphan_messages_total{consumer="searchworker-brave"} 1`)
	})
	dlq, err := b.RawJetStream().Stream(t.Context(), bus.StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := dlq.GetLastMsgForSubject(t.Context(), bus.SubjectDLQ(bus.StreamSearch, bus.ConsumerSearch("brave")))
	if err != nil {
		t.Fatalf("no dead letter: %v", err)
	}
	if reason := msg.Header.Get(bus.HeaderDLQReason); !strings.Contains(reason, "unknown job") {
		t.Fatalf("dead letter reason %q", reason)
	}
	if n := f.Sim.Stats().Requests["brave"]; n != before {
		t.Fatalf("brave searched %d times for an orphan", n-before)
	}
}
