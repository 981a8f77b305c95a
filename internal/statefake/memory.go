// Package statefake is an in-memory stand-in for the Redis store (pkg/state) behind
// the narrow ports its consumers declare: chat.Ledger and chat.Records, search.Store,
// webhook.Store. Memory keeps the semantics the conformance suites check (the same
// suites pkg/state's tests run against Redis), so unit tests that run on it rely on
// nothing Redis does not do. Jobs and chains are chaintest.Memory's.
package statefake

import (
	"sync"

	"github.com/searchfleet/searchfleet/pkg/chat/chaintest"
)

// Memory is the in-memory store. It is safe for concurrent use.
type Memory struct {
	*chaintest.Memory

	mu sync.Mutex
	// spend ledgers (spend.go)
	jobLedgers   map[string]*ledger
	batchLedgers map[string]*ledger
	periods      map[string]*counter // tenant/day, tenant/month
	calls        map[string]map[string]*entry
	// recorded results (records.go): job or batch → address → result
	records map[string]map[string][]byte
	// search calls (search.go)
	done      map[string][]byte
	fallbacks map[string]*fallback
	leases    map[string]*lease
	cache     map[string]cached
	buckets   map[string]*bucket
	// webhooks (webhook.go)
	secrets   map[string]string
	deferrals map[string]int
	hooks     map[string]string
}

// New returns an empty store.
func New() *Memory { return Over(chaintest.NewMemory()) }

// Over returns a store whose jobs and chains are jm's: a unit test that runs its
// chains on jm gives its worker the ledgers and records of the same jobs.
func Over(jm *chaintest.Memory) *Memory {
	return &Memory{Memory: jm,
		jobLedgers: map[string]*ledger{}, batchLedgers: map[string]*ledger{}, periods: map[string]*counter{}, calls: map[string]map[string]*entry{},
		records: map[string]map[string][]byte{},
		done:    map[string][]byte{}, fallbacks: map[string]*fallback{}, leases: map[string]*lease{}, cache: map[string]cached{}, buckets: map[string]*bucket{},
		secrets: map[string]string{}, deferrals: map[string]int{}, hooks: map[string]string{},
	}
}

// batchOf is a job's batch ("" for none or no such job).
func (m *Memory) batchOf(jobID string) string {
	if j := m.Memory.Job(jobID); j != nil {
		return j.Batch
	}
	return ""
}
