package state

import (
	"context"
	"fmt"
	"time"

	"github.com/searchfleet/searchfleet/pkg/spend"
)

// A tenant's storage quota counts the bytes of every record the fleet keeps for it
// until the record expires (job records: request, answer, trace, chain and recorded
// searches). The ledger is two keys in the tenant's hash slot: a hash of "used" and
// each record's bytes ("b:<record>"), and a sorted set of the records by expiry. A
// record is charged before it is written (or, when it grows, as it grows) in one
// script that checks the limit and counts it; it is given back when deleted
// (ReleaseRecord) or, once past its expiry, by the next quota call of the tenant,
// which sweeps what lapsed (at most 128 records a call; every call sweeps, so the
// ledger keeps up with any rate of writes). Records are named, not located: the same
// ledger counts a record whether Redis or another store (a JetStream KV bucket with
// the same TTL) holds its bytes.

// RecordAllowance is what a new job is charged beyond its request until it ends
// (spend.RecordAllowance).
const RecordAllowance = spend.RecordAllowance

// storageLedger gives back a tenant's records past their expiry, then charges a
// record's bytes, releases a record's or reads the ledger. (lua/storage_ledger.lua)
var storageLedger = script("storage_ledger")

// Storage is a tenant's storage quota as it stands (spend.Storage).
type Storage = spend.Storage

// ChargeRecord charges record, bytes that tenant keeps until expires, against its
// storage quota of limit bytes (0: no limit, the bytes are counted all the same).
// Charging a record again moves it to its new size and expiry. It reports whether the
// record was charged: a growth that does not fit is refused (nothing changes), unless
// force is set (the bytes are written already: they are counted, and the tenant's next
// record is refused). The check and the count are one atomic step across processes.
func (s *Ledger) ChargeRecord(ctx context.Context, tenant, record string, bytes int64, expires time.Time, limit int64, force bool) (bool, Storage, error) {
	lim := int64(-1)
	if limit > 0 {
		lim = limit
	}
	f := "0"
	if force {
		f = "1"
	}
	v, err := storageLedger.Run(ctx, s.r, s.storageKeys(tenant), "charge", record, bytes, expires.UnixMilli(), lim, f).Int64Slice()
	if err != nil || len(v) != 3 {
		return false, Storage{}, fmt.Errorf("state: charging storage: %w", err)
	}
	st := Storage{Used: v[1], Limit: max(limit, 0)}
	if v[2] > 0 {
		st.FirstExpiry = time.UnixMilli(v[2]).UTC()
	}
	return v[0] == 1, st, nil
}

// ReleaseRecord gives a deleted record's bytes back to its tenant's quota (a record
// not charged is no error).
func (s *Ledger) ReleaseRecord(ctx context.Context, tenant, record string) error {
	if err := storageLedger.Run(ctx, s.r, s.storageKeys(tenant), "release", record).Err(); err != nil {
		return fmt.Errorf("state: releasing storage: %w", err)
	}
	return nil
}

// StorageOf reads tenant's storage use (records past their expiry given back first).
func (s *Ledger) StorageOf(ctx context.Context, tenant string) (Storage, error) {
	v, err := storageLedger.Run(ctx, s.r, s.storageKeys(tenant), "used").Int64Slice()
	if err != nil || len(v) != 2 {
		return Storage{}, fmt.Errorf("state: reading storage: %w", err)
	}
	return Storage{Used: v[0], Records: v[1]}, nil
}

// storageKeys are tenant's storage ledger and its records by expiry.
func (s *Ledger) storageKeys(tenant string) []string {
	return []string{s.K.quotaBytes(tenant), s.K.quotaExpiries(tenant)}
}

// jobFootprint sums the bytes (field names and values) of a job's hashes, and the
// archived bytes the job record notes (field "cold"). (lua/job_footprint.lua)
var jobFootprint = script("job_footprint")

// JobFootprint is what a job keeps for the retention period, in bytes: its record
// (request, answer, trace, usage), its chain (every hop's turn and results) and its
// recorded searches, and its stored Responses object if it has one — wherever they
// are: what Redis holds plus the bytes of its archived record (ArchiveJob). The
// tenant's quota is charged this when the job ends.
func (s *Ledger) JobFootprint(ctx context.Context, id string) (int64, error) {
	keys := []string{s.K.Job(id), s.K.StoredResponse(id)}
	n, err := jobFootprint.Run(ctx, s.r, keys).Int64()
	if err != nil {
		return 0, fmt.Errorf("state: measuring job %s: %w", id, err)
	}
	return n, nil
}

// DropSearchResults deletes a job's stored search outcomes and fallback state (the
// calls' fields of its hash, calls.go) once the job has ended: each outcome repeats a
// result the chain keeps, and only a redelivered search of a running job reads it (a
// search of an ended job is not made).
func (s *Ledger) DropSearchResults(ctx context.Context, id string) error {
	if s.archive != nil {
		return nil // ArchiveJob, the first finish hook, drops them with the chain
	}
	fields, err := s.r.HKeys(ctx, s.K.Job(id)).Result()
	if err != nil {
		return fmt.Errorf("state: reading job %s's fields: %w", id, err)
	}
	var drop []string
	for _, f := range fields {
		if kindOf(f) == callStateField {
			drop = append(drop, f)
		}
	}
	if len(drop) == 0 {
		return nil
	}
	if err := s.r.HDel(ctx, s.K.Job(id), drop...).Err(); err != nil {
		return fmt.Errorf("state: dropping job %s's search results: %w", id, err)
	}
	return nil
}
