// Package spend holds the spend policy the fleet enforces — tenants' budgets, model
// prices, a request's or batch's cap, which budget refused a call — apart from where
// spend is counted (pkg/state's ledgers in Redis), so configuration can name it
// without depending on storage.
package spend

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Besides the tenant's day and month, a paid call is counted in two capped ledgers:
// its job's (the request's max_cost_usd) and its batch's (the batch's
// metadata.max_cost_usd). They name the budget that refused a search.
const (
	BudgetRequest = "request"
	BudgetBatch   = "batch"
)

// Pricing is what a main model's tokens cost, in US dollars per million tokens
// (a model route's "pricing" in the config file). A zero Pricing makes turns free.
type Pricing struct {
	InputPerMTokUSD  float64 `json:"inputPerMTokUSD,omitempty"`
	OutputPerMTokUSD float64 `json:"outputPerMTokUSD,omitempty"`
	// MaxOutputTokens is the most tokens one answer of the model can bill when its
	// request sets no max_tokens (the model's output limit): a turn's worst case is
	// reserved with it before the model is called (0: 4096).
	MaxOutputTokens int `json:"maxOutputTokens,omitempty"`
}

// Validate refuses negative or non-finite prices.
func (p Pricing) Validate() error {
	for _, v := range []float64{p.InputPerMTokUSD, p.OutputPerMTokUSD} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return errors.New("token prices must be zero or positive numbers of dollars per million tokens")
		}
	}
	if p.MaxOutputTokens < 0 {
		return errors.New("maxOutputTokens must be zero (the default, 4096) or positive")
	}
	return nil
}

// Cost prices one model turn of in prompt and out completion tokens, rounded to the
// micro-dollar the ledgers count in.
func (p Pricing) Cost(in, out int) float64 {
	return USD(Micros((float64(in)*p.InputPerMTokUSD + float64(out)*p.OutputPerMTokUSD) / 1e6))
}

// CheckCap validates a client's spending cap (max_cost_usd): a positive, finite
// number of dollars.
func CheckCap(usd float64) error {
	if usd <= 0 || math.IsNaN(usd) || math.IsInf(usd, 0) || Micros(usd) < 1 {
		return errors.New("must be a positive number of US dollars")
	}
	return nil
}

// Budget caps a tenant's paid searches per UTC day and month, in searches and in
// dollars. A zero field sets no limit; a Budget with every field zero only records
// spend. It is written in the config file (a tenant's "budget") and, for the default,
// in the environment (config.Env.DefaultBudget).
type Budget struct {
	SearchesPerDay   int64   `json:"searchesPerDay,omitempty" env:"SEARCHES_PER_DAY"`
	SearchesPerMonth int64   `json:"searchesPerMonth,omitempty" env:"SEARCHES_PER_MONTH"`
	USDPerDay        float64 `json:"usdPerDay,omitempty" env:"USD_PER_DAY"`
	USDPerMonth      float64 `json:"usdPerMonth,omitempty" env:"USD_PER_MONTH"`
}

// Budgets are the tenants' budgets.
type Budgets struct {
	// ByTenant holds the budgets the config file sets.
	ByTenant map[string]Budget
	// Default is the budget of every other tenant.
	Default Budget
}

// For returns tenant's budget.
func (b *Budgets) For(tenant string) Budget {
	if b == nil {
		return Budget{}
	}
	if v, ok := b.ByTenant[tenant]; ok {
		return v
	}
	return b.Default
}

// Validate refuses negative limits.
func (b Budget) Validate() error {
	if b.SearchesPerDay < 0 || b.SearchesPerMonth < 0 || b.USDPerDay < 0 || b.USDPerMonth < 0 ||
		math.IsNaN(b.USDPerDay) || math.IsNaN(b.USDPerMonth) || math.IsInf(b.USDPerDay, 0) || math.IsInf(b.USDPerMonth, 0) {
		return errors.New("budget limits must be zero (no limit) or positive")
	}
	return nil
}

// The budgets a limit can be hit on; they name the budget in metrics
// (fleet_budget_exhausted_total{budget}) and in errors.
const (
	BudgetUSDDay        = "usd_day"
	BudgetUSDMonth      = "usd_month"
	BudgetSearchesDay   = "searches_day"
	BudgetSearchesMonth = "searches_month"
)

// Exhausted says which budget refused a search or a job.
type Exhausted struct {
	// Budget is one of the Budget* names.
	Budget string
	// Limit is the budget's size, in USD or searches.
	Limit float64
	// Reset is when the budget's period ends (UTC midnight, or the first of the next
	// month); zero for a request's or batch's cap, which never resets.
	Reset time.Time
}

// Describe names the budget in words a client or model can act on: "daily spending
// budget of $0.05" (searches and model turns count toward the dollar budgets),
// "daily search budget of 100 searches".
func (e *Exhausted) Describe() string {
	switch e.Budget {
	case BudgetRequest:
		return fmt.Sprintf("request's spending cap (max_cost_usd) of $%s", strconv.FormatFloat(e.Limit, 'f', -1, 64))
	case BudgetBatch:
		return fmt.Sprintf("batch's spending cap (metadata.max_cost_usd) of $%s", strconv.FormatFloat(e.Limit, 'f', -1, 64))
	}
	period := "daily"
	if e.Budget == BudgetUSDMonth || e.Budget == BudgetSearchesMonth {
		period = "monthly"
	}
	if e.Budget == BudgetUSDDay || e.Budget == BudgetUSDMonth {
		return fmt.Sprintf("%s spending budget of $%s", period, strconv.FormatFloat(e.Limit, 'f', -1, 64))
	}
	return fmt.Sprintf("%s search budget of %d searches", period, int64(e.Limit))
}

// Spend is what a tenant has spent (reservations in flight included) in the current
// UTC day and month.
type Spend struct {
	Day           string  `json:"day"`
	DayUSD        float64 `json:"day_usd"`
	DaySearches   int64   `json:"day_searches"`
	Month         string  `json:"month"`
	MonthUSD      float64 `json:"month_usd"`
	MonthSearches int64   `json:"month_searches"`
}

// Check reports the first budget spend has used up (nil when every limit has room):
// the ingress refuses a tenant's new jobs on it.
func (b Budget) Check(sp Spend, now time.Time) *Exhausted {
	switch {
	case b.USDPerDay > 0 && Micros(sp.DayUSD) >= Micros(b.USDPerDay):
		return b.Refusal(BudgetUSDDay, now)
	case b.SearchesPerDay > 0 && sp.DaySearches >= b.SearchesPerDay:
		return b.Refusal(BudgetSearchesDay, now)
	case b.USDPerMonth > 0 && Micros(sp.MonthUSD) >= Micros(b.USDPerMonth):
		return b.Refusal(BudgetUSDMonth, now)
	case b.SearchesPerMonth > 0 && sp.MonthSearches >= b.SearchesPerMonth:
		return b.Refusal(BudgetSearchesMonth, now)
	}
	return nil
}

// Refusal is the Exhausted of the tenant budget named (a ledger's answer: one of
// BudgetUSDDay, BudgetUSDMonth, BudgetSearchesDay, BudgetSearchesMonth) in the period
// of now, with its limit and when it resets; nil for any other name.
func (b Budget) Refusal(name string, now time.Time) *Exhausted {
	day, month := PeriodEnds(now)
	switch name {
	case BudgetUSDDay:
		return &Exhausted{Budget: name, Limit: b.USDPerDay, Reset: day}
	case BudgetSearchesDay:
		return &Exhausted{Budget: name, Limit: float64(b.SearchesPerDay), Reset: day}
	case BudgetUSDMonth:
		return &Exhausted{Budget: name, Limit: b.USDPerMonth, Reset: month}
	case BudgetSearchesMonth:
		return &Exhausted{Budget: name, Limit: float64(b.SearchesPerMonth), Reset: month}
	}
	return nil
}

// PeriodEnds returns when the UTC day and month of t end.
func PeriodEnds(t time.Time) (day, month time.Time) {
	t = t.UTC()
	y, m, d := t.Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC), time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
}

// Micros is usd in the integer micro-dollars the ledgers count in, so limits compare
// exactly.
func Micros(usd float64) int64 { return int64(math.Round(usd * 1e6)) }

// USD is n micro-dollars in dollars.
func USD(n int64) float64 { return float64(n) / 1e6 }

// Round rounds usd to the micro-dollar (no float noise).
func Round(usd float64) float64 { return USD(Micros(usd)) }
