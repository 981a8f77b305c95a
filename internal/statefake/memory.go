// Package statefake is an in-memory stand-in for the Redis store (pkg/state) behind
// the narrow ports its consumers declare: chat.ChainStore, chat.Ledger and
// chat.Records, jobs.Store, search.Store and search.Calls, engines.Cooldowns,
// webhook.Store, batch.Store. Memory keeps the semantics the conformance suites check
// (chaintest, searchtest, webhookstoretest, batchstoretest: pkg/state's tests run the
// same suites against Redis), so unit tests that run on it rely on nothing Redis does not do.
//
// It imports no consumer of pkg/state, so the unit tests of any of them (pkg/webhook's
// internal ones included) can use it.
package statefake

import (
	"sync"
	"time"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// Memory is the in-memory store, with the semantics of the Redis one: first writes
// win, results are counted once, leases lapse after their ttl unless kept alive, a
// terminal status is never overwritten, a call's spend is counted once. It is safe
// for concurrent use.
type Memory struct {
	mu sync.Mutex
	// jobs and chains (chain.go)
	jobs      map[string]*state.Job
	chains    map[string]*memChain
	leases    map[string]*memLease // hops' ("job/h"), calls' ("search/…"), the reaper's
	sticky    map[string]time.Time
	deadlines map[string]time.Time
	// spend ledgers (spend.go)
	jobLedgers map[string]*ledger
	// paid are the prices StartSearch held against jobs' ledgers, by job and call
	// (ReserveHeld goes on with them).
	paid         map[string]int64
	batchLedgers map[string]*ledger
	periods      map[string]*counter // tenant/day, tenant/month
	calls        map[string]map[string]*entry
	// recorded results (records.go): job or batch → address → result
	records map[string]map[string][]byte
	// search calls (search.go)
	done      map[string][]byte
	fallbacks map[string]*fallback
	cache     map[string]cached // results, and key cooldowns
	buckets   map[string]*bucket
	// webhooks (webhook.go)
	secrets   map[string]string
	deferrals map[string]int
	// batches, files, tenant leases and storage quotas (batch.go, files.go)
	batches       map[string]*memBatch
	active        map[string]bool
	tenantBatches map[string]map[string]time.Time // tenant → batch id → created
	files         map[string]*state.File
	tenantFiles   map[string]map[string]time.Time // tenant → file id → created
	fileBytes     map[string]map[string]int64     // tenant → file id → bytes
	fileExpiries  map[string]time.Time            // "id/tenant" → expiry
	tenantLeases  map[string]map[string]time.Time // kind/tenant → lease id → until
	quotas        map[string]*quota

	// Retention is how long records, batches and files are kept after they end
	// (state.Store.Retention; New sets an hour, as the tests' Redis stores have).
	Retention time.Duration
}

type memChain struct {
	turns, calls    map[int][]byte
	expected, count map[int]int
	results         map[int]map[string][]byte
	// place is each result's place among its hop's, by "hop/call".
	place      map[string]int
	sticky, gp bool
	searches   int
}

type memLease struct {
	owner string
	until time.Time
	ttl   time.Duration
	kept  bool
}

// New returns an empty store.
func New() *Memory {
	return &Memory{
		jobs: map[string]*state.Job{}, chains: map[string]*memChain{}, leases: map[string]*memLease{},
		sticky: map[string]time.Time{}, deadlines: map[string]time.Time{},
		jobLedgers: map[string]*ledger{}, paid: map[string]int64{}, batchLedgers: map[string]*ledger{}, periods: map[string]*counter{}, calls: map[string]map[string]*entry{},
		records: map[string]map[string][]byte{},
		done:    map[string][]byte{}, fallbacks: map[string]*fallback{}, cache: map[string]cached{}, buckets: map[string]*bucket{},
		secrets: map[string]string{}, deferrals: map[string]int{},
		batches: map[string]*memBatch{}, active: map[string]bool{}, tenantBatches: map[string]map[string]time.Time{},
		files: map[string]*state.File{}, tenantFiles: map[string]map[string]time.Time{}, fileBytes: map[string]map[string]int64{},
		fileExpiries: map[string]time.Time{}, tenantLeases: map[string]map[string]time.Time{}, quotas: map[string]*quota{},
		Retention: time.Hour,
	}
}

// batchOf is a job's batch ("" for none or no such job). m.mu is held.
func (m *Memory) batchOf(jobID string) string {
	if j, ok := m.jobs[jobID]; ok {
		return j.Batch
	}
	return ""
}
