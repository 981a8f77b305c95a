package ingress

import (
	"context"
	"time"

	"github.com/searchfleet/searchfleet/pkg/ingress/console"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Store is what the ingress reads and writes of the fleet's state (*state.Store
// implements it). The console's routes take their part of it (console.Store).
type Store interface {
	jobs.Recorder
	console.Store
	// Ping answers /readyz.
	Ping(ctx context.Context) error
	// RecordRetention is how long an ended job's record is kept.
	RecordRetention() time.Duration

	// Jobs.
	GetJob(ctx context.Context, id string) (*state.Job, error)
	DeleteJob(ctx context.Context, id string) error
	ArchiveJob(ctx context.Context, id string) (int64, error)
	JobFootprint(ctx context.Context, id string) (int64, error)
	DropSearchResults(ctx context.Context, id string) error
	ClaimIdempotency(ctx context.Context, tenant, key, jobID, requestHash string, ttl time.Duration) (ok bool, existingJob, existingHash string, err error)
	IdempotencyClaimed(ctx context.Context, tenant, key string) (bool, error)

	// Stored responses and files.
	GetResponse(ctx context.Context, id string) (*state.StoredResponse, error)
	SaveResponse(ctx context.Context, id string, r *state.StoredResponse) error
	GetFile(ctx context.Context, id string) (*state.File, error)

	// Tenants' limits: leases on their open slots, request rate, spend and storage.
	AcquireLease(ctx context.Context, kind, tenant, id string, limit int, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, kind, tenant, id string) error
	AllowTenant(ctx context.Context, tenant string, perSecond float64, burst int) (time.Duration, error)
	SpendOf(ctx context.Context, tenant string, now time.Time) (state.Spend, error)
	StorageOf(ctx context.Context, tenant string) (state.Storage, error)
	FileUsage(ctx context.Context, tenant string) (files int, bytes int64, err error)
	ChargeRecord(ctx context.Context, tenant, record string, bytes int64, expires time.Time, limit int64, force bool) (bool, state.Storage, error)
	ReleaseRecord(ctx context.Context, tenant, record string) error
}
