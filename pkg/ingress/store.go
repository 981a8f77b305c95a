package ingress

import (
	"context"
	"encoding/json"
	"time"

	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/spend"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Store is what the ingress reads and writes of the fleet's state, one port per
// aggregate of pkg/state; StoreOf builds it from the Redis store.
type Store struct {
	Jobs   Jobs
	Files  Files
	Leases Leases
	Ledger Ledger
	Health Health
	// Conversations are the Conversations API's (state.Conversations).
	Conversations Conversations
}

// StoreOf is the ingress's view of st.
func StoreOf(st *state.Store) Store {
	return Store{Jobs: st.Jobs, Files: st.Files, Leases: st.Leases, Ledger: st.Ledger, Health: st, Conversations: st.Conversations}
}

// Jobs are the jobs the ingress records, reads, ends and lists, with their stored
// responses and Idempotency-Keys (state.Jobs).
type Jobs interface {
	jobs.Recorder
	TenantJobs(ctx context.Context, tenant, after string, limit int) ([]*state.Job, bool, error)
	// RecordRetention is how long an ended job's record is kept.
	RecordRetention() time.Duration
	GetJob(ctx context.Context, id string) (*state.Job, error)
	DeleteJob(ctx context.Context, id string) error
	ForgetAnswer(ctx context.Context, id string) (bool, error)
	ClaimIdempotency(ctx context.Context, tenant, key, jobID, requestHash string, ttl time.Duration) (ok bool, existingJob, existingHash string, err error)
	IdempotencyClaimed(ctx context.Context, tenant, key string) (bool, error)
	ReleaseIdempotency(ctx context.Context, tenant, key, jobID, requestHash string) error
	GetResponse(ctx context.Context, id string) (*state.StoredResponse, error)
	SaveResponse(ctx context.Context, id string, r *state.StoredResponse) error
	DeleteResponse(ctx context.Context, id string) error
	ResponseConversation(ctx context.Context, id string) (string, error)
}

// Conversations are the tenants' conversations (state.Conversations).
type Conversations interface {
	CreateConversation(ctx context.Context, c *state.Conversation, items []state.ConversationItem) error
	GetConversation(ctx context.Context, id string) (*state.Conversation, error)
	SetConversationMetadata(ctx context.Context, id string, metadata map[string]string) error
	AddConversationItems(ctx context.Context, id, guard string, items []state.ConversationItem) (int, int64, error)
	ConversationItems(ctx context.Context, id string) ([]state.ConversationItem, error)
	ConversationItem(ctx context.Context, id, itemID string) (json.RawMessage, error)
	DeleteConversationItem(ctx context.Context, id, itemID string) (int64, error)
	DeleteConversation(ctx context.Context, id string) error
	ConversationRetention() time.Duration
}

// Files are the tenants' uploaded files (state.Files).
type Files interface {
	GetFile(ctx context.Context, id string) (*state.File, error)
	FileUsage(ctx context.Context, tenant string) (files int, bytes int64, err error)
}

// Leases are the tenants' open slots and request rate (state.Leases).
type Leases interface {
	AcquireLease(ctx context.Context, kind, tenant, id string, limit int, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, kind, tenant, id string) error
	AllowTenant(ctx context.Context, tenant string, perSecond float64, burst int) (time.Duration, error)
}

// Ledger is the tenants' spend and storage (state.Ledger).
type Ledger interface {
	ModelSpend(ctx context.Context, tenant string, days int, now time.Time) ([]state.ModelDaySpend, error)
	SpendOf(ctx context.Context, tenant string, now time.Time) (spend.Spend, error)
	StorageOf(ctx context.Context, tenant string) (state.Storage, error)
	JobFootprint(ctx context.Context, id string) (int64, error)
	DropSearchResults(ctx context.Context, id string) error
	ChargeRecord(ctx context.Context, tenant, record string, bytes int64, expires time.Time, limit int64, force bool) (bool, state.Storage, error)
	ReleaseRecord(ctx context.Context, tenant, record string) error
}

// Health answers /readyz (state.Store).
type Health interface {
	Ping(ctx context.Context) error
}
