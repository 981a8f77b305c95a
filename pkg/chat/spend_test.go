package chat_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/chat"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/spend"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// withLedger prices the harness model's turns ($3 / $15 per million tokens: each
// 10+5-token turn costs $0.000105) into the harness's store.
func withLedger(w *chat.Worker, h *harness) {
	m := w.Models["m"]
	m.Pricing = spend.Pricing{InputPerMTokUSD: 3, OutputPerMTokUSD: 15}
	w.Models = map[string]chat.Model{"m": m}
	w.Ledger = h.store.Ledger
	w.Metrics = metrics.New()
}

const turnUSD = 0.000105

// A worker killed at each crash point of a step: every model turn stored is counted
// exactly once in the tenant's and the job's ledgers, and the job's usage says what
// it cost. A crash after the turn is stored but before it is recorded leaves it to
// the completion's sweep; one after it is recorded does not count it again.
func TestModelTurnRecordedOnceUnderRedelivery(t *testing.T) {
	t.Parallel()
	for _, point := range []string{"chat.after_model_call", "chat.after_turn_stored", "chat.after_dispatch"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			answers := []func(http.ResponseWriter){calls(webSearch("c1", "weather")), text("Sunny [1].")}
			if point == "chat.after_model_call" {
				answers = append([]func(http.ResponseWriter){calls(webSearch("c1", "weather"))}, answers...)
			}
			type crash struct{}
			h := newHarness(t, answers, withLedger, func(w *chat.Worker, h *harness) {
				w.Failpoint = func(name string) {
					if name == point {
						panic(crash{})
					}
				}
			})
			h.submitRaw(&state.Job{ID: "j1", Tenant: "acme", Kind: "chat", Model: "m",
				Request: storedChat(t, `{"model":"m","messages":[{"role":"user","content":"Search the web: weather?"}]}`)})
			func() {
				defer func() {
					if r := recover(); r != (crash{}) {
						t.Fatalf("no crash at %s: %v", point, r)
					}
				}()
				h.job("j1", 1)
			}()
			h.w.Failpoint, h.w.ID = nil, "w2"
			var err error
			for attempt := 2; ; attempt++ {
				if err = h.job("j1", 2); err == nil || attempt > 20 {
					break
				}
				if d := decide(err, 2); d.Action != bus.Nak {
					t.Fatalf("attempt %d: %v → %+v", attempt, err, d)
				}
				time.Sleep(50 * time.Millisecond) // the dead worker's lease lapses
			}
			if err != nil {
				t.Fatal(err)
			}
			reqs := h.pub.searches()
			if len(reqs) == 0 {
				t.Fatal("no search published")
			}
			// The resume is delivered twice: the second finds the job ended.
			for range 2 {
				if err := h.resume(answerSearch(reqs[len(reqs)-1], "https://w.example/"), 1); err != nil {
					t.Fatal(err)
				}
			}
			j := h.ended("j1")
			var u struct {
				ModelCost float64 `json:"model_cost_usd"`
				Cost      float64 `json:"cost_usd"`
			}
			if err := json.Unmarshal(j.Usage, &u); err != nil || u.ModelCost != 2*turnUSD || u.Cost != 2*turnUSD {
				t.Errorf("usage %s, want two turns of $%v", j.Usage, turnUSD)
			}
			if !strings.Contains(string(j.Response), `"model_cost_usd":0.00021`) {
				t.Errorf("answer %s lacks usage.searchfleet", j.Response)
			}
			sp, err := h.store.Ledger.SpendOf(context.Background(), "acme", time.Now())
			job, _, _ := h.store.Ledger.RequestSpend(context.Background(), "j1")
			if err != nil || sp.DayUSD != 2*turnUSD || sp.DaySearches != 0 || job != 2*turnUSD {
				t.Errorf("tenant ledger %+v, job ledger %v (%v); want the two stored turns once each", sp, job, err)
			}
			if got := testutil.ToFloat64(h.w.Metrics.SpendUSD.WithLabelValues("acme", metrics.SpendModel, "m")); got < 2*turnUSD-1e-12 || got > 2*turnUSD+1e-12 {
				t.Errorf("fleet_spend_usd_total{kind=model} = %v, want %v", got, 2*turnUSD)
			}
		})
	}
}

// A model turn is reserved at its worst case (the request's bytes as tokens, its
// max_tokens) against the request's max_cost_usd before the model is called: hop 0
// fits the $0.003 cap, hop 1, which reads a search result, does not, so the job fails
// with a budget error naming the cap and the model is called once. The cap is set
// before the first hop.
func TestMaxCostReservesModelTurns(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []func(http.ResponseWriter){calls(webSearch("c1", "weather")), text("Sunny [1].")}, withLedger)
	h.submitRaw(&state.Job{ID: "j1", Tenant: "acme", Kind: "chat", Model: "m",
		Request: storedChat(t, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"Search the web: weather?"}],"web_search_options":{"max_cost_usd":0.003}}`)})
	if err := h.job("j1", 1); err != nil {
		t.Fatal(err)
	}
	if _, limit, _ := h.store.Ledger.RequestSpend(context.Background(), "j1"); limit != 0.003 {
		t.Fatalf("the request's cap was not set before the first hop: %v", limit)
	}
	reqs := h.pub.searches()
	if len(reqs) != 1 {
		t.Fatalf("searches published: %d (job %+v)", len(reqs), h.stored("j1"))
	}
	res := answerSearch(reqs[0], "https://w.example/")
	res.Result.Summary = strings.Repeat("It is sunny today. ", 200)
	if err := h.resume(res, 1); err != nil {
		t.Fatal(err)
	}
	j := h.ended("j1")
	if j.Status != state.Failed || j.Error == nil || j.Error.Status != http.StatusTooManyRequests || j.Error.Type != "insufficient_quota" ||
		!strings.Contains(j.Error.Message, "max_cost_usd") {
		t.Errorf("job %s, error %+v; want failed with a budget error naming max_cost_usd", j.Status, j.Error)
	}
	if n := h.model.calls(); n != 1 {
		t.Errorf("the model was called %d times, want once: the turn that does not fit is never made", n)
	}
	if usd, _, _ := h.store.Ledger.RequestSpend(context.Background(), "j1"); usd != turnUSD {
		t.Errorf("the job's ledger holds $%v, want the one turn's $%v (the refused reservation given back)", usd, turnUSD)
	}
}

// A tenant whose daily budget cannot pay for the model's first turn gets no model
// call: the job fails with a budget error (429, insufficient_quota) that names the
// budget and when it resets, the refusal is counted, nothing stays held in the
// ledgers, and a redelivery of the job changes nothing.
func TestTenantBudgetRefusesTheFirstTurn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []func(http.ResponseWriter){text("Hello.")}, withLedger, func(w *chat.Worker, _ *harness) {
		w.Budgets = &spend.Budgets{Default: spend.Budget{USDPerDay: 0.0001}}
	})
	h.submitRaw(&state.Job{ID: "j1", Tenant: "acme", Kind: "chat", Model: "m",
		Request: storedChat(t, `{"model":"m","messages":[{"role":"user","content":"hi there"}]}`)})
	for attempt := 1; attempt <= 2; attempt++ {
		if err := h.job("j1", attempt); err != nil {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
	}
	j := h.ended("j1")
	if j.Status != state.Failed || j.Error == nil || j.Error.Status != http.StatusTooManyRequests || j.Error.Type != "insufficient_quota" ||
		j.Error.Code != "budget_exhausted" || !strings.Contains(j.Error.Message, "daily spending budget of $0.0001") || !strings.Contains(j.Error.Message, "It resets at") {
		t.Fatalf("job %s, error %+v; want a budget error naming the daily budget and its reset", j.Status, j.Error)
	}
	if n := h.model.calls(); n != 0 {
		t.Errorf("the model was called %d times", n)
	}
	if got := h.pub.ends(); len(got) != 1 || got[0] != "j1:failed" {
		t.Errorf("terminal events %v, want one failed", got)
	}
	if got := testutil.ToFloat64(h.w.Metrics.BudgetExhausted.WithLabelValues("acme", spend.BudgetUSDDay)); got != 1 {
		t.Errorf("fleet_budget_exhausted_total{budget=usd_day} = %v, want 1 (the redelivery finds the job ended)", got)
	}
	sp, err := h.store.Ledger.SpendOf(context.Background(), "acme", time.Now())
	job, _, _ := h.store.Ledger.RequestSpend(context.Background(), "j1")
	if err != nil || sp.DayUSD != 0 || job != 0 {
		t.Errorf("tenant ledger %+v, job ledger %v (%v): a refused turn holds nothing", sp, job, err)
	}
}
