package state

import (
	"context"
	"time"
)

// Leases of search and fetch calls, named by call rather than by key, for the ports
// the search workers declare (search.Calls).

// KeepSearch keeps owner's lease of call (hop h of job id) alive until the returned
// function is called; with drop set, that also frees the lease (see KeepAlive).
func (s *Searches) KeepSearch(id string, h int, call, owner string, ttl time.Duration) func(drop bool) {
	return s.keepAlive(s.K.searchLease(id, h, call), owner, ttl)
}

// ReleaseSearch frees owner's lease of call (hop h of job id) at once.
func (s *Searches) ReleaseSearch(ctx context.Context, id string, h int, call, owner string) error {
	return s.release(ctx, s.K.searchLease(id, h, call), owner)
}

// HoldBatch takes the lease of batch id's driver for owner and keeps it alive until
// released (see Hold); when another driver holds it, release is nil and left says how
// long that lease has.
func (s *Batches) HoldBatch(ctx context.Context, id, owner string, ttl time.Duration) (release func(drop bool), left time.Duration, err error) {
	return s.hold(ctx, s.K.BatchLease(id), owner, ttl)
}

// RecordRetention is how long job records, batches and their files are kept after
// they end (Retention), for ports that cannot read a field.
func (s *Jobs) RecordRetention() time.Duration { return s.Retention }
