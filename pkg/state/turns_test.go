package state_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/spend"
)

// Model turns reserved at their worst case against a $0.05 daily budget: of 30 turns
// of up to $0.01 reserved at once, five fit; each is settled to what it cost, which
// makes room again; a redelivered turn reserves nothing more; a reservation never
// settled (its worker died) lapses and is given back; a turn settled after its
// reservation lapsed is still counted, once.
func TestTurnReservationsHoldTheBudget(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	b := spend.Budget{USDPerDay: 0.05}
	now := time.Now()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var fit []string
	refused := map[string]int{}
	for i := range 30 {
		wg.Go(func() {
			job := fmt.Sprintf("j%d", i)
			call := job + ":0@model"
			ex, err := s.Ledger.ReserveTurn(ctx, job, "acme", call, 0.01, 0, b, time.Hour, now)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Error(err)
			case ex != nil:
				refused[ex.Budget]++
			default:
				fit = append(fit, job)
			}
		})
	}
	wg.Wait()
	if len(fit) != 5 || refused[spend.BudgetUSDDay] != 25 {
		t.Fatalf("%d turns fit, refused %v; want 5, and 25 on the daily budget", len(fit), refused)
	}
	spend := func() float64 {
		t.Helper()
		sp, err := s.Ledger.SpendOf(ctx, "acme", now)
		if err != nil {
			t.Fatal(err)
		}
		return sp.DayUSD
	}
	if got := spend(); got != 0.05 {
		t.Fatalf("reserved $%v, want $0.05", got)
	}
	if missing, err := s.Ledger.UnrecordedCalls(ctx, "acme", []string{fit[0] + ":0@model"}, now); err != nil || len(missing) != 1 {
		t.Errorf("a reservation not settled yet is not listed for the completion's sweep: %v %v", missing, err)
	}
	for _, job := range fit {
		if fresh, err := s.Ledger.SettleTurn(ctx, job, "acme", job+":0@model", 0.004, 0, now); err != nil || !fresh {
			t.Fatalf("settling %s: %v %v", job, fresh, err)
		}
	}
	if got := spend(); got != 0.02 {
		t.Fatalf("settled to $%v, want five turns of $0.004", got)
	}
	// A redelivered step: its turn is reserved (and settled) already.
	if ex, err := s.Ledger.ReserveTurn(ctx, fit[0], "acme", fit[0]+":0@model", 0.01, 0, b, time.Hour, now); err != nil || ex != nil || spend() != 0.02 {
		t.Fatalf("a redelivered turn reserved again: %v %v, spend $%v", ex, err, spend())
	}
	if fresh, err := s.Ledger.SettleTurn(ctx, fit[0], "acme", fit[0]+":0@model", 0.004, 0, now); err != nil || fresh || spend() != 0.02 {
		t.Fatalf("settling twice counted again: %v %v, spend $%v", fresh, err, spend())
	}
	if usd, _, _ := s.Ledger.RequestSpend(ctx, fit[0]); usd != 0.004 {
		t.Errorf("the job's ledger holds $%v, want $0.004", usd)
	}

	// A worker dies holding $0.03: the budget is full until its reservation lapses.
	if ex, err := s.Ledger.ReserveTurn(ctx, "dead", "acme", "dead:0@model", 0.03, 0, b, time.Second, now); err != nil || ex != nil {
		t.Fatalf("reserving: %v %v", ex, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ex, err := s.Ledger.ReserveTurn(ctx, "next", "acme", "next:0@model", 0.01, 0, b, time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		if ex == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a lapsed reservation was never given back")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := spend(); got != 0.03 {
		t.Errorf("after the lapse, spend $%v, want $0.02 settled and $0.01 reserved", got)
	}
	// The dead worker's turn was paid after all (a slow worker settles late): counted once.
	if fresh, err := s.Ledger.SettleTurn(ctx, "dead", "acme", "dead:0@model", 0.002, 0, now); err != nil || !fresh {
		t.Fatalf("settling a lapsed turn: %v %v", fresh, err)
	}
	s.Ledger.SettleTurn(ctx, "dead", "acme", "dead:0@model", 0.002, 0, now)
	if got := spend(); got != 0.032 {
		t.Errorf("spend $%v, want $0.032", got)
	}
}

// A turn whose model may run its provider's own search is reserved with those
// searches against the searches budget too, and settled to the searches it ran.
func TestTurnReservationCountsNativeSearches(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	now := time.Now()
	b := spend.Budget{SearchesPerDay: 5}
	if ex, err := s.Ledger.ReserveTurn(ctx, "j1", "acme", "j1:0@model", 0.05, 5, b, time.Hour, now); err != nil || ex != nil {
		t.Fatalf("reserving five native searches: %v %v", ex, err)
	}
	if ex, err := s.Ledger.ReserveTurn(ctx, "j2", "acme", "j2:0@model", 0.05, 1, b, time.Hour, now); err != nil || ex == nil || ex.Budget != spend.BudgetSearchesDay {
		t.Fatalf("a sixth search fit: %v %v", ex, err)
	}
	if _, err := s.Ledger.SettleTurn(ctx, "j1", "acme", "j1:0@model", 0.02, 2, now); err != nil {
		t.Fatal(err)
	}
	sp, err := s.Ledger.SpendOf(ctx, "acme", now)
	if err != nil || sp.DaySearches != 2 || sp.DayUSD != 0.02 {
		t.Errorf("spend %+v (%v), want 2 searches and $0.02", sp, err)
	}
}
