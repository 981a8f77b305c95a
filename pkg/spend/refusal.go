package spend

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// A refused job, model turn or submission is answered as a provider answers an
// account out of money: 429, type insufficient_quota, code CodeBudget (a spend budget
// or cap) or CodeStorage (the tenant's storage quota). A refused search is not an
// error: the model reads a SEARCH_BUDGET_EXHAUSTED result (SearchRefused) and answers
// with what it has.
const (
	RefusedStatus = http.StatusTooManyRequests
	RefusedType   = "insufficient_quota"
	CodeBudget    = "budget_exhausted"
	CodeStorage   = "storage_quota_exceeded"
)

// TurnRefused is the error message of a job whose next model turn (up to usd) e's
// budget cannot pay: no model call is made.
func (e *Exhausted) TurnRefused(usd float64) string {
	msg := fmt.Sprintf("The %s cannot pay for the model's next turn (up to $%s); no model call was made.", e.Describe(), strconv.FormatFloat(Round(usd), 'f', -1, 64))
	if !e.Reset.IsZero() {
		msg += " It resets at " + e.Reset.Format(time.RFC3339) + "."
	}
	return msg
}

// SearchRefused is the detail of the result a search gets instead of being made.
func (e *Exhausted) SearchRefused() string {
	if e.Reset.IsZero() {
		return fmt.Sprintf("The %s is used up; no search was made.", e.Describe())
	}
	return fmt.Sprintf("The %s is used up until %s; no search was made.", e.Describe(), e.Reset.Format(time.RFC3339))
}

// JobsRefused is the error message of a new job (or batch) refused while its tenant's
// budget e is used up, and the seconds until it resets (Retry-After).
func (e *Exhausted) JobsRefused(now time.Time) (msg string, retryAfter int64) {
	msg = fmt.Sprintf("The %s is used up; new jobs are refused until %s. See GET /v1/usage.", e.Describe(), e.Reset.Format(time.RFC3339))
	return msg, int64(math.Ceil(e.Reset.Sub(now).Seconds()))
}
