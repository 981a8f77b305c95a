package state_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/spend"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// reserveAll runs the calls concurrently, as several search workers would, and
// counts the reservations and the refusals by budget.
func reserveAll(t *testing.T, s *state.Store, calls map[string]string, b spend.Budget) (holds []*state.Hold, refused map[string]int) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	refused = map[string]int{}
	for call, job := range calls {
		wg.Go(func() {
			h, ex, err := s.Ledger.ReserveCall(context.Background(), job, "acme", call, 0.01, b, time.Now())
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Error(err)
			case ex != nil:
				refused[ex.Budget]++
			default:
				holds = append(holds, h)
			}
		})
	}
	wg.Wait()
	return holds, refused
}

// A request's max_cost_usd of $0.05 admits exactly five $0.01 searches, however many
// are asked for at once; the refusals hold nothing in the tenant's budget.
func TestRequestCapIsAtomic(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.Jobs.CreateJob(ctx, &state.Job{ID: "j1", Tenant: "acme", Kind: "chat"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Ledger.SetRequestCap(ctx, "j1", 0.05); err != nil {
		t.Fatal(err)
	}
	calls := map[string]string{}
	for i := range 20 {
		calls[fmt.Sprintf("j1:1:c%d@brave", i)] = "j1"
	}
	holds, refused := reserveAll(t, s, calls, spend.Budget{USDPerDay: 1})
	if len(holds) != 5 || refused[spend.BudgetRequest] != 15 {
		t.Fatalf("reserved %d, refused %v; want 5 and 15 on the request's cap", len(holds), refused)
	}
	usd, limit, err := s.Ledger.RequestSpend(ctx, "j1")
	if err != nil || usd != 0.05 || limit != 0.05 {
		t.Fatalf("request spend %v of %v, %v", usd, limit, err)
	}
	if sp, _ := s.Ledger.SpendOf(ctx, "acme", time.Now()); sp.DayUSD != 0.05 || sp.DaySearches != 5 {
		t.Fatalf("tenant spend %+v, want the five searches only", sp)
	}
	// A search that failed unbilled gives its money back to the request: one more fits.
	if err := s.Ledger.SettleCall(ctx, holds[0], 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, ex, err := s.Ledger.ReserveCall(ctx, "j1", "acme", "j1:2:c0@brave", 0.01, spend.Budget{}, time.Now()); err != nil || ex != nil {
		t.Fatalf("after a release: %v %v", ex, err)
	}
	_, ex, _ := s.Ledger.ReserveCall(ctx, "j1", "acme", "j1:2:c1@brave", 0.01, spend.Budget{}, time.Now())
	if ex == nil || ex.Budget != spend.BudgetRequest || ex.Describe() != "request's spending cap (max_cost_usd) of $0.05" {
		t.Fatalf("past the cap: %+v", ex)
	}
}

// A batch's cap spans all its jobs: $0.03 admits three searches of the batch's six,
// whichever jobs ask; a refusal by the batch gives back what the job's own ledger
// reserved, and a later refusal by the tenant gives back both.
func TestBatchCapSpansJobs(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	calls := map[string]string{}
	for j := range 3 {
		id := fmt.Sprintf("b1-%d", j)
		if err := s.Jobs.CreateJob(ctx, &state.Job{ID: id, Tenant: "acme", Kind: "chat", Batch: "b1"}); err != nil {
			t.Fatal(err)
		}
		calls[id+":1:a@brave"], calls[id+":1:b@brave"] = id, id
	}
	if err := s.Ledger.SetBatchCap(ctx, "b1", 0.03, time.Hour); err != nil {
		t.Fatal(err)
	}
	holds, refused := reserveAll(t, s, calls, spend.Budget{})
	if len(holds) != 3 || refused[spend.BudgetBatch] != 3 {
		t.Fatalf("reserved %d, refused %v; want 3 and 3 on the batch's cap", len(holds), refused)
	}
	total := 0.0
	for j := range 3 {
		usd, _, err := s.Ledger.RequestSpend(ctx, fmt.Sprintf("b1-%d", j))
		if err != nil {
			t.Fatal(err)
		}
		total += usd
	}
	if usd, limit, _ := s.Ledger.BatchSpendOf(ctx, "b1"); usd != 0.03 || limit != 0.03 || total < 0.0299 || total > 0.0301 {
		t.Fatalf("batch spend %v of %v, jobs %v; want 0.03 each", usd, limit, total)
	}

	// The tenant refuses: nothing stays held in the job's or the batch's ledger.
	if err := s.Jobs.CreateJob(ctx, &state.Job{ID: "b2-0", Tenant: "poor", Kind: "chat", Batch: "b2"}); err != nil {
		t.Fatal(err)
	}
	_, ex, err := s.Ledger.ReserveCall(ctx, "b2-0", "poor", "b2-0:1:a@brave", 0.01, spend.Budget{USDPerDay: 0.001}, time.Now())
	if err != nil || ex == nil || ex.Budget != spend.BudgetUSDDay {
		t.Fatalf("tenant refusal: %+v %v", ex, err)
	}
	if usd, _, _ := s.Ledger.RequestSpend(ctx, "b2-0"); usd != 0 {
		t.Errorf("job ledger holds %v after the tenant refused", usd)
	}
	if usd, _, _ := s.Ledger.BatchSpendOf(ctx, "b2"); usd != 0 {
		t.Errorf("batch ledger holds %v after the tenant refused", usd)
	}
}

// A model turn is counted once in each ledger however often it is recorded (a
// redelivered step, the completion sweep), in dollars, never as a search.
func TestSettleUnreservedTurnOnce(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.Jobs.CreateJob(ctx, &state.Job{ID: "m1", Tenant: "acme", Kind: "chat", Batch: "bm"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	fresh := 0
	for range 8 {
		wg.Go(func() {
			ok, err := s.Ledger.SettleTurn(ctx, "m1", "acme", "m1:0@model", 0.0042, 0, time.Now())
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				fresh++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if fresh != 1 {
		t.Errorf("recorded fresh %d times, want once", fresh)
	}
	sp, _ := s.Ledger.SpendOf(ctx, "acme", time.Now())
	job, _, _ := s.Ledger.RequestSpend(ctx, "m1")
	batch, _, _ := s.Ledger.BatchSpendOf(ctx, "bm")
	if sp.DayUSD != 0.0042 || sp.MonthUSD != 0.0042 || sp.DaySearches != 0 || job != 0.0042 || batch != 0.0042 {
		t.Fatalf("tenant %+v, job %v, batch %v; want $0.0042 once, no search", sp, job, batch)
	}
	// Model spend uses up the tenant's dollars: the next search finds the budget spent.
	if _, ex, _ := s.Ledger.ReserveCall(ctx, "m1", "acme", "m1:1:a@brave", 0.001, spend.Budget{USDPerDay: 0.005}, time.Now()); ex == nil || ex.Budget != spend.BudgetUSDDay {
		t.Fatalf("search after model spend: %+v", ex)
	}
}
