package ingress

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/spend"
)

// budgeted refuses a new job (or batch) of a tenant whose spend budget is used up: 429
// in codec's error shape, naming the budget, with Retry-After set to the seconds until
// the budget's period resets. A retry under an Idempotency-Key that already names a
// job passes, so it gets that job. A budget with room admits the job; its model turns
// and searches are still reserved one by one at their worst case (chat.Worker,
// search.Worker), so a job admitted near the limit gets SEARCH_BUDGET_EXHAUSTED
// results, or fails with a budget error when its next model turn cannot be paid,
// never an overdraft.
func (s *Server) budgeted(codec wire.ClientCodec, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tenant := tenantOf(r)
		b := s.Budgets.For(tenant)
		now := time.Now()
		var ex *spend.Exhausted
		if b != (spend.Budget{}) {
			sp, err := s.Store.Ledger.SpendOf(r.Context(), tenant, now)
			if err != nil {
				// The job cannot be recorded without Redis either; let the submission say so.
				s.Log.Warn("api: reading spend", "tenant", tenant, "err", err)
			} else {
				ex = b.Check(sp, now)
			}
		}
		// A retry of an accepted submission gets its job, not a refusal.
		if ex == nil || s.acceptedRetry(r, tenant) {
			h(w, r)
			return
		}
		if s.Metrics != nil {
			s.Metrics.BudgetExhausted.WithLabelValues(tenant, ex.Budget).Inc()
		}
		msg, after := ex.JobsRefused(now)
		w.Header().Set("Retry-After", strconv.FormatInt(after, 10))
		writeWireError(w, codec, &wire.Error{Status: spend.RefusedStatus, Type: spend.RefusedType, Code: spend.CodeBudget, Message: msg})
	}
}

// usagePeriod is a tenant's spend in one budget period, with its limits and what is
// left of them (null: no limit).
type usagePeriod struct {
	Period            string   `json:"period"`
	ResetsAt          string   `json:"resets_at"`
	SpentUSD          float64  `json:"spent_usd"`
	Searches          int64    `json:"searches"`
	BudgetUSD         *float64 `json:"budget_usd"`
	BudgetSearches    *int64   `json:"budget_searches"`
	RemainingUSD      *float64 `json:"remaining_usd"`
	RemainingSearches *int64   `json:"remaining_searches"`
}

func newUsagePeriod(period string, reset time.Time, usd float64, n int64, limitUSD float64, limitN int64) usagePeriod {
	u := usagePeriod{Period: period, ResetsAt: reset.Format(time.RFC3339), SpentUSD: usd, Searches: n}
	if limitUSD > 0 {
		left := math.Max(0, math.Round((limitUSD-usd)*1e6)/1e6)
		u.BudgetUSD, u.RemainingUSD = &limitUSD, &left
	}
	if limitN > 0 {
		left := max(0, limitN-n)
		u.BudgetSearches, u.RemainingSearches = &limitN, &left
	}
	return u
}

// usage serves GET /v1/usage: the calling tenant's spend (model turns and searches,
// reservations in flight included) and what is left of its budget, for the current
// UTC day and month, and its storage (job records and files) against its quotas.
func (s *Server) usage(w http.ResponseWriter, r *http.Request) {
	tenant := tenantOf(r)
	now := time.Now()
	sp, err := s.Store.Ledger.SpendOf(r.Context(), tenant, now)
	var storage storageUsage
	if err == nil {
		storage, err = s.storageOf(r.Context(), tenant)
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "", "Reading usage failed; try again.")
		return
	}
	b := s.Budgets.For(tenant)
	dayEnd, monthEnd := spend.PeriodEnds(now)
	writeJSON(w, http.StatusOK, map[string]any{
		"object":  "usage",
		"tenant":  tenant,
		"day":     newUsagePeriod(sp.Day, dayEnd, sp.DayUSD, sp.DaySearches, b.USDPerDay, b.SearchesPerDay),
		"month":   newUsagePeriod(sp.Month, monthEnd, sp.MonthUSD, sp.MonthSearches, b.USDPerMonth, b.SearchesPerMonth),
		"storage": storage,
	})
}
