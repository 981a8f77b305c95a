// Package chaintest keeps the chat worker's store honest: Run is the conformance suite
// every chat.ChainStore passes, RunLedger that of chat.Ledger and chat.Records. The
// Redis store in pkg/state passes both, on a Redis server and over miniredis.
package chaintest

import (
	"context"
	"time"

	"github.com/searchfleet/searchfleet/pkg/chat"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Store is a chain store a test can put jobs in.
type Store interface {
	chat.ChainStore
	CreateJob(ctx context.Context, j *state.Job) error
	// What ending a job needs (jobs.Store, jobs.ReaperStore): the suite keeps a
	// store's endings as honest as its chains.
	// Finish moves a job that has not ended to a terminal status with fields
	// ("response", "usage", "trace", "error"). It reports whether it moved the job: a
	// terminal status is never overwritten.
	Finish(ctx context.Context, id string, status state.Status, fields ...any) (bool, error)
	JobStatus(ctx context.Context, id string) (state.Status, error)
	GetJob(ctx context.Context, id string) (*state.Job, error)

	// LockReaper, Overdue and ForgetDeadline serve the deadline reaper.
	LockReaper(ctx context.Context, owner string, ttl time.Duration) (bool, error)
	Overdue(ctx context.Context, now time.Time, n int64) ([]string, error)
	ForgetDeadline(ctx context.Context, id string) error
	// Settle (jobs.Store) puts back the terminal status the event stream recorded.
	Settle(ctx context.Context, id string, status state.Status, je *state.JobError) error
	// SaveSearchResult (search.Calls) is how a search worker stores a chain's result
	// before its resume records it.
	SaveSearchResult(ctx context.Context, id string, h int, call string, b []byte, rec *state.Recording) error
}
