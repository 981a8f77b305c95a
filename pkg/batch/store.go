package batch

import (
	"context"
	"iter"
	"time"

	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Batches is what the batch service keeps of a batch: its record, its lines' custom
// ids and outcomes, its driver's lease, and the indexes that list batches
// (state.Batches).
type Batches interface {
	CreateBatch(ctx context.Context, b *state.Batch, customIDs []string) error
	// GetBatch reads a batch (state.ErrNotFound: none, or expired); BatchStatus reads
	// only its status.
	GetBatch(ctx context.Context, id string) (*state.Batch, error)
	BatchStatus(ctx context.Context, id string) (string, error)
	BatchOutcomes(ctx context.Context, id string) (map[int]string, error)
	BatchCustomIDs(ctx context.Context, id string) (map[int]string, error)
	// CountBatchLine records line i's outcome once; AdvanceBatch moves the expansion
	// cursor. Each reports whether this call resolved the batch (every line counted,
	// expansion done): exactly one caller finalizes it.
	CountBatchLine(ctx context.Context, id string, i int, outcome string) (resolved bool, err error)
	AdvanceBatch(ctx context.Context, id string, cursor int, done bool) (resolved bool, err error)
	// CancelBatch marks a batch cancelling unless it ended, returning its status;
	// FinishBatch moves it to a terminal status once.
	CancelBatch(ctx context.Context, id string) (string, error)
	FinishBatch(ctx context.Context, id, status string, end state.BatchEnd) (bool, error)
	// HoldBatch takes the batch driver's lease and keeps it until released.
	HoldBatch(ctx context.Context, id, owner string, ttl time.Duration) (release func(drop bool), left time.Duration, err error)
	ActiveBatches(ctx context.Context) ([]string, error)
	ForgetActiveBatch(ctx context.Context, id string) error
	TenantBatches(ctx context.Context, tenant, after string) iter.Seq2[string, error]
	ForgetTenantBatch(ctx context.Context, tenant, id string) error
}

// Files is the uploaded and produced files' store (state.Files).
type Files interface {
	SaveFile(ctx context.Context, f *state.File) error
	GetFile(ctx context.Context, id string) (*state.File, error)
	DeleteFile(ctx context.Context, f *state.File) error
	FileUsage(ctx context.Context, tenant string) (files int, bytes int64, err error)
	ExpiredFiles(ctx context.Context, limit int) ([]*state.File, error)
	TenantFiles(ctx context.Context, tenant, after string, asc bool) iter.Seq2[string, error]
}

// Jobs is what the batch service needs of its lines' jobs (state.Jobs).
type Jobs interface {
	jobs.Recorder
	GetJob(ctx context.Context, id string) (*state.Job, error)
	// RecordRetention is how long records, batches and files are kept after they end.
	RecordRetention() time.Duration
}

// Ledger is the batches' spend caps and the tenants' storage quota (state.Ledger).
type Ledger interface {
	// SetBatchCap caps the spend of the batch's jobs.
	SetBatchCap(ctx context.Context, batchID string, usd float64, ttl time.Duration) error
	// ChargeRecord counts a record's bytes against the tenant's storage quota.
	ChargeRecord(ctx context.Context, tenant, record string, bytes int64, expires time.Time, limit int64, force bool) (bool, state.Storage, error)
}

// Leases are the tenants' limited slots (state.Leases).
type Leases interface {
	// AcquireLease and ReleaseLease hold one of a tenant's limited slots of a kind.
	AcquireLease(ctx context.Context, kind, tenant, id string, limit int, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, kind, tenant, id string) error
}

// Webhooks moves a batch's callback state (state.Webhooks).
type Webhooks interface {
	// SetBatchWebhook moves the batch's callback state as webhook.Store does.
	SetBatchWebhook(ctx context.Context, id, to string, from ...string) error
}

// Store is what the batch service needs of the fleet's state: batches, files, the
// jobs it submits, the tenants' concurrency leases, spend caps and storage quota.
// Parts is the Redis one.
type Store interface {
	Batches
	Files
	Jobs
	Ledger
	Leases
	Webhooks
}

// Parts is a Store made of its parts (state.Store's aggregates of those names).
type Parts struct {
	Batches
	Files
	Jobs
	Ledger
	Leases
	Webhooks
}

// StoreOf is the Redis Store over st.
func StoreOf(st *state.Store) Parts {
	return Parts{Batches: st.Batches, Files: st.Files, Jobs: st.Jobs, Ledger: st.Ledger, Leases: st.Leases, Webhooks: st.Webhooks}
}

var _ Store = Parts{}
