package batch

import (
	"strconv"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// Ended reports whether a batch status is final (completed, failed, expired, cancelled).
func Ended(status string) bool {
	switch status {
	case state.BatchCompleted, state.BatchFailed, state.BatchExpired, state.BatchCancelled:
		return true
	}
	return false
}

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
