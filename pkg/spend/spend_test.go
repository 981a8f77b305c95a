package spend_test

import (
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/spend"
)

func TestPricing(t *testing.T) {
	p := spend.Pricing{InputPerMTokUSD: 3, OutputPerMTokUSD: 15}
	if got := p.Cost(1000, 200); got != 0.006 {
		t.Errorf("cost = %v, want 0.006", got)
	}
	if (spend.Pricing{InputPerMTokUSD: -1}).Validate() == nil || p.Validate() != nil {
		t.Error("validation")
	}
	for _, v := range []float64{0, -1, 1e-9} {
		if spend.CheckCap(v) == nil {
			t.Errorf("cap %v accepted", v)
		}
	}
}

func TestBudgetValidate(t *testing.T) {
	t.Parallel()
	if err := (spend.Budget{USDPerDay: -1}).Validate(); err == nil {
		t.Fatal("negative budget accepted")
	}
	if err := (spend.Budget{USDPerDay: 0.05, SearchesPerMonth: 100}).Validate(); err != nil {
		t.Fatal(err)
	}
}

// Check names the first budget spend has used up, with its limit and the end of its
// period; the ledgers' answers name the same refusals.
func TestCheckNamesTheBudget(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 10, 15, 0, 0, 0, time.UTC)
	day, month := time.Date(2026, 3, 11, 0, 0, 0, 0, time.UTC), time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	b := spend.Budget{USDPerDay: 0.05, SearchesPerDay: 10, USDPerMonth: 1, SearchesPerMonth: 100}
	for _, c := range []struct {
		sp     spend.Spend
		budget string
		limit  float64
		reset  time.Time
		says   string
	}{
		{spend.Spend{}, "", 0, time.Time{}, ""},
		{spend.Spend{DayUSD: 0.05}, spend.BudgetUSDDay, 0.05, day, "daily spending budget of $0.05"},
		{spend.Spend{DaySearches: 10}, spend.BudgetSearchesDay, 10, day, "daily search budget of 10 searches"},
		{spend.Spend{MonthUSD: 1}, spend.BudgetUSDMonth, 1, month, "monthly spending budget of $1"},
		{spend.Spend{MonthSearches: 100}, spend.BudgetSearchesMonth, 100, month, "monthly search budget of 100 searches"},
	} {
		ex := b.Check(c.sp, now)
		if c.budget == "" {
			if ex != nil {
				t.Errorf("%+v: refused by %+v", c.sp, ex)
			}
			continue
		}
		if ex == nil || ex.Budget != c.budget || ex.Limit != c.limit || !ex.Reset.Equal(c.reset) || ex.Describe() != c.says {
			t.Errorf("%+v: %+v, want %s of %v until %v", c.sp, ex, c.budget, c.limit, c.reset)
		}
		if r := b.Refusal(c.budget, now); *r != *ex {
			t.Errorf("Refusal(%s) = %+v, want %+v", c.budget, r, ex)
		}
	}
	if b.Refusal("ok", now) != nil {
		t.Error("an answer that names no budget refused")
	}
}

// A turn's worst case is its bytes as tokens at least 3 bytes long, its answer's
// bound, and its native searches at their price, or $0.01 when unknown.
func TestWorstCase(t *testing.T) {
	t.Parallel()
	p := spend.Pricing{InputPerMTokUSD: 1e6, OutputPerMTokUSD: 1e6} // $1 a token
	for _, c := range []struct {
		p                   spend.Pricing
		size, max, searches int
		searchUSD, want     float64
	}{
		{p, 30, 100, 0, 0, 11 + 100},
		{p, 30, 0, 0, 0, 11 + spend.DefaultMaxOutputTokens},
		{spend.Pricing{InputPerMTokUSD: 1e6, OutputPerMTokUSD: 1e6, MaxOutputTokens: 7}, 30, 0, 0, 0, 11 + 7},
		{spend.Pricing{}, 30, 100, 3, 0.02, 0.06},
		{spend.Pricing{}, 30, 100, 2, 0, 2 * spend.FallbackSearchUSD},
	} {
		if got := c.p.WorstCase(c.size, c.max, c.searches, c.searchUSD); got != c.want {
			t.Errorf("%+v: worst case %v, want %v", c, got, c.want)
		}
	}
}

// What a refusal says names the budget, what was not done and when it resets.
func TestRefusalMessages(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 10, 23, 59, 0, 500e6, time.UTC)
	day := spend.Budget{USDPerDay: 0.05}.Refusal(spend.BudgetUSDDay, now)
	capped := &spend.Exhausted{Budget: spend.BudgetRequest, Limit: 0.01}
	if got := day.TurnRefused(0.0123456789); got != "The daily spending budget of $0.05 cannot pay for the model's next turn (up to $0.012346); no model call was made. It resets at 2026-03-11T00:00:00Z." {
		t.Error(got)
	}
	if got := capped.TurnRefused(0.02); strings.Contains(got, "resets") {
		t.Error(got)
	}
	if got := day.SearchRefused(); got != "The daily spending budget of $0.05 is used up until 2026-03-11T00:00:00Z; no search was made." {
		t.Error(got)
	}
	if got := capped.SearchRefused(); got != "The request's spending cap (max_cost_usd) of $0.01 is used up; no search was made." {
		t.Error(got)
	}
	msg, after := day.JobsRefused(now)
	if after != 60 || msg != "The daily spending budget of $0.05 is used up; new jobs are refused until 2026-03-11T00:00:00Z. See GET /v1/usage." {
		t.Errorf("%q, Retry-After %d", msg, after)
	}
}
