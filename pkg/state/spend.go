package state

import (
	"time"

	"github.com/searchfleet/searchfleet/pkg/spend"
)

// The spend policy types live in pkg/spend (configuration names them without
// depending on storage); these names keep the ledgers' callers unchanged.
type (
	Budget    = spend.Budget
	Budgets   = spend.Budgets
	Exhausted = spend.Exhausted
	Spend     = spend.Spend
	Pricing   = spend.Pricing
)

// The budgets a limit can be hit on (spend.Budget*).
const (
	BudgetRequest       = spend.BudgetRequest
	BudgetBatch         = spend.BudgetBatch
	BudgetUSDDay        = spend.BudgetUSDDay
	BudgetUSDMonth      = spend.BudgetUSDMonth
	BudgetSearchesDay   = spend.BudgetSearchesDay
	BudgetSearchesMonth = spend.BudgetSearchesMonth
)

// PeriodEnds returns when the UTC day and month of t end (spend.PeriodEnds).
func PeriodEnds(t time.Time) (day, month time.Time) { return spend.PeriodEnds(t) }
