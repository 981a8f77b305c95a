package batch

import (
	"context"
	"strconv"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// The batch statuses (see state.BatchValidating and the rest), by their short names.
const (
	statusValidating = state.BatchValidating
	statusFailed     = state.BatchFailed
	statusInProgress = state.BatchInProgress
	statusFinalizing = state.BatchFinalizing
	statusCompleted  = state.BatchCompleted
	statusExpired    = state.BatchExpired
	statusCancelling = state.BatchCancelling
	statusCancelled  = state.BatchCancelled
)

// Ended reports whether a batch status is final (completed, failed, expired, cancelled).
func Ended(status string) bool {
	switch status {
	case statusCompleted, statusFailed, statusExpired, statusCancelled:
		return true
	}
	return false
}

// How a line's job ended, as recorded in the batch's done hash.
const (
	outcomeCompleted = state.LineCompleted
	outcomeFailed    = state.LineFailed
	outcomeCancelled = state.LineCancelled
	outcomeExpired   = state.LineExpired
)

// record is a batch as stored.
type record = state.Batch

// lineError is one problem of a batch's input, or why a batch failed.
type lineError = state.BatchError

// jobID is the id of the job of line i: derived from the batch id, so a redelivered
// expansion finds the job it created before instead of creating another.
func jobID(batchID string, i int) string { return batchID + "_" + strconv.Itoa(i) }

// lineOf returns the line index of one of a batch's jobs.
func lineOf(batchID, jobID string) (int, bool) {
	if len(jobID) <= len(batchID)+1 || jobID[:len(batchID)] != batchID || jobID[len(batchID)] != '_' {
		return 0, false
	}
	n, err := strconv.Atoi(jobID[len(batchID)+1:])
	return n, err == nil && n >= 0
}

// errNoBatch means there is no such batch (or it expired from Redis).
var errNoBatch = state.ErrNotFound

// load reads a batch record.
func (s *Service) load(ctx context.Context, id string) (*record, error) {
	return s.Store.GetBatch(ctx, id)
}
