package state_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/spend"
)

// Concurrent reservations against one budget never overshoot it: $0.05 a day at $0.01
// a search admits exactly five, whoever asks.
func TestReserveSpendIsAtomic(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	now := time.Now()
	b := spend.Budget{USDPerDay: 0.05}
	var mu sync.Mutex
	ok, refused := 0, map[string]int{}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			r, ex, err := s.Ledger.ReserveSpend(ctx, "t1", fmt.Sprintf("call-%d", i), 0.01, b, now)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Error(err)
			case ex != nil:
				refused[ex.Budget]++
			case r != nil:
				ok++
			}
		})
	}
	wg.Wait()
	if ok != 5 || refused[spend.BudgetUSDDay] != 35 {
		t.Fatalf("reserved %d, refused %v; want 5 and 35 on usd_day", ok, refused)
	}
	sp, err := s.Ledger.SpendOf(ctx, "t1", now)
	if err != nil {
		t.Fatal(err)
	}
	if sp.DayUSD != 0.05 || sp.DaySearches != 5 || sp.MonthUSD != 0.05 || sp.MonthSearches != 5 {
		t.Fatalf("spend = %+v", sp)
	}
	if ex := b.Check(sp, now); ex == nil || ex.Budget != spend.BudgetUSDDay || ex.Describe() != "daily spending budget of $0.05" {
		t.Fatalf("check = %+v", ex)
	}
	// Another tenant's budget is its own.
	if r, ex, err := s.Ledger.ReserveSpend(ctx, "t2", "call-0", 0.01, b, now); err != nil || ex != nil || r == nil {
		t.Fatalf("other tenant: %v %v %v", r, ex, err)
	}
}

// A redelivered search reserves once: the second reservation of the same call finds
// the first.
func TestReserveSpendOncePerCall(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	now := time.Now()
	b := spend.Budget{SearchesPerDay: 2}
	for range 3 {
		if r, ex, err := s.Ledger.ReserveSpend(ctx, "t", "job1:0:c1", 0.01, b, now); err != nil || ex != nil || r == nil {
			t.Fatalf("reserve again: %v %v %v", r, ex, err)
		}
	}
	sp, _ := s.Ledger.SpendOf(ctx, "t", now)
	if sp.DaySearches != 1 || sp.DayUSD != 0.01 {
		t.Fatalf("spend after 3 reservations of one call = %+v, want 1 search, $0.01", sp)
	}
	if _, ex, _ := s.Ledger.ReserveSpend(ctx, "t", "job1:0:c2", 0.01, b, now); ex != nil {
		t.Fatalf("second call refused: %+v", ex)
	}
	_, ex, _ := s.Ledger.ReserveSpend(ctx, "t", "job1:0:c3", 0.01, b, now)
	if ex == nil || ex.Budget != spend.BudgetSearchesDay || ex.Describe() != "daily search budget of 2 searches" {
		t.Fatalf("third call: %+v, want searches_day", ex)
	}
	if !ex.Reset.After(now) || ex.Reset.Sub(now) > 24*time.Hour {
		t.Fatalf("reset %v is not the end of today (now %v)", ex.Reset, now)
	}
}

// Settling moves a reservation to the real cost; a failed call releases it, which
// frees the budget for another search; settling twice counts once.
func TestSettleSpend(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	now := time.Now()
	b := spend.Budget{USDPerDay: 0.02, USDPerMonth: 1}
	r1, _, err := s.Ledger.ReserveSpend(ctx, "t", "a", 0.01, b, now)
	if err != nil {
		t.Fatal(err)
	}
	r2, _, _ := s.Ledger.ReserveSpend(ctx, "t", "b", 0.01, b, now)
	if _, ex, _ := s.Ledger.ReserveSpend(ctx, "t", "c", 0.01, b, now); ex == nil {
		t.Fatal("third search within $0.02 allowed")
	}
	// a cost less than reserved; b failed unbilled.
	for range 2 {
		if err := s.Ledger.SettleSpend(ctx, r1, 0.004, 1); err != nil {
			t.Fatal(err)
		}
		if err := s.Ledger.SettleSpend(ctx, r2, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	sp, _ := s.Ledger.SpendOf(ctx, "t", now)
	if sp.DayUSD != 0.004 || sp.DaySearches != 1 || sp.MonthUSD != 0.004 || sp.MonthSearches != 1 {
		t.Fatalf("spend after settling = %+v, want $0.004 and 1 search", sp)
	}
	if _, ex, _ := s.Ledger.ReserveSpend(ctx, "t", "c", 0.01, b, now); ex != nil {
		t.Fatalf("released budget still refused: %+v", ex)
	}
	// A settled call is still known: its redelivery reserves nothing.
	if _, _, err := s.Ledger.ReserveSpend(ctx, "t", "b", 0.01, b, now); err != nil {
		t.Fatal(err)
	}
	sp, _ = s.Ledger.SpendOf(ctx, "t", now)
	if sp.DaySearches != 2 || sp.DayUSD != 0.014 {
		t.Fatalf("spend = %+v, want 2 searches, $0.014", sp)
	}
}

// A monthly budget refuses across days and names itself.
func TestMonthlyBudget(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	d1 := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	d2 := d1.Add(24 * time.Hour)
	b := spend.Budget{USDPerMonth: 0.03}
	for i, d := range []time.Time{d1, d1, d2} {
		if _, ex, err := s.Ledger.ReserveSpend(ctx, "t", fmt.Sprint(i), 0.01, b, d); err != nil || ex != nil {
			t.Fatalf("reserve %d: %v %v", i, ex, err)
		}
	}
	_, ex, _ := s.Ledger.ReserveSpend(ctx, "t", "x", 0.01, b, d2)
	if ex == nil || ex.Budget != spend.BudgetUSDMonth || !ex.Reset.Equal(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("fourth search of the month: %+v", ex)
	}
	if ex.Describe() != "monthly spending budget of $0.03" {
		t.Fatal(ex.Describe())
	}
	sp, _ := s.Ledger.SpendOf(ctx, "t", d2)
	if sp.DaySearches != 1 || sp.MonthSearches != 3 || sp.Day != "20260311" || sp.Month != "202603" {
		t.Fatalf("spend = %+v", sp)
	}
}
