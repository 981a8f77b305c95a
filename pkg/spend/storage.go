package spend

import (
	"context"
	"fmt"
	"time"
)

// A tenant's storage quota (config.Limits.StorageBytes) bounds the bytes of the job
// records the fleet keeps for it over the retention period, in Redis and in the
// records bucket alike. A job is charged its request and RecordAllowance when it is
// submitted (ChargeNew), before its record is written, and its real size (what Redis
// keeps of it plus its archived record) when it ends, whatever the quota (the bytes
// are written: the tenant's next job is refused instead); its bytes come back when
// the record expires, or at once when an unaccepted job is deleted. A record that
// does not fit is refused with 429 storage_quota_exceeded (StorageRefused), counted
// in fleet_tenant_rejected_total{limit="storage_bytes"}.

// RecordAllowance is what a new job is charged beyond its request until it ends and
// its real size is known: room for its answer, trace and chain (64 KiB).
const RecordAllowance = 64 << 10

// Storage is a tenant's storage quota as it stands.
type Storage struct {
	// Used is the bytes charged; Records how many records hold them.
	Used    int64
	Records int64
	// Limit is the quota (0: none).
	Limit int64
	// FirstExpiry is when the tenant's oldest record expires (zero: none), which is
	// the soonest bytes come back on their own.
	FirstExpiry time.Time
}

// StorageLedger counts the records' bytes against the tenants' quotas (state.Ledger).
type StorageLedger interface {
	// ChargeRecord charges record, bytes kept until expires, against a quota of limit
	// bytes (0: none), atomically; it reports whether it fit (always, with force).
	ChargeRecord(ctx context.Context, tenant, record string, bytes int64, expires time.Time, limit int64, force bool) (bool, Storage, error)
}

// ChargeNew charges a new job's record, its request of size bytes and
// RecordAllowance, kept until expires, to tenant's quota of limit bytes (0: none, and
// nothing is charged) before the record is written. It reports whether the record
// fits, and the quota as it stands when it does not. Charging a record again changes
// nothing.
func ChargeNew(ctx context.Context, l StorageLedger, tenant, record string, size int, expires time.Time, limit int64) (bool, Storage, error) {
	if limit <= 0 {
		return true, Storage{}, nil
	}
	return l.ChargeRecord(ctx, tenant, record, int64(size)+RecordAllowance, expires, limit, false)
}

// StorageRefused is the error message of a record refused by a quota of limit bytes
// of which used are kept, followed by then (what happens next).
func StorageRefused(limit, used int64, then string) string {
	return fmt.Sprintf("The tenant's storage quota of %d bytes is used up (%d bytes of job records kept); %s", limit, used, then)
}
