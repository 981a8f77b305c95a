package state

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// A tenant's concurrent resources (synchronous waits, open streams, unfinished jobs,
// unfinished batches) are counted by a semaphore in Redis shared by every ingress
// replica: a sorted set of leases scored by when each expires. A holder renews its
// lease while it holds it and removes it when done; the lease of an ingress that died
// expires on its own, so a crash never leaks a slot for longer than the lease.

// Lease kinds: what a semaphore counts.
const (
	LeaseSyncWaits = "sync"
	LeaseStreams   = "sse"
	LeaseJobs      = "jobs"
	LeaseBatches   = "batches"
)

// acquire takes one of a tenant's limited leases of a kind, if fewer than limit live
// ones are held; taking a lease the caller holds already renews it.
// (lua/acquire_lease.lua)
var acquire = script("acquire_lease")

// AcquireLease takes tenant's lease id of kind for ttl if fewer than limit are held
// (limit 0: no limit, nothing is recorded). It reports whether it was taken.
// Acquiring a lease held already renews it.
func (s *Leases) AcquireLease(ctx context.Context, kind, tenant, id string, limit int, ttl time.Duration) (bool, error) {
	if limit <= 0 {
		return true, nil
	}
	n, err := acquire.Run(ctx, s.r, []string{s.K.tenantLeases(kind, tenant)}, id, limit, ttl.Milliseconds(), time.Now().UnixMilli()).Int()
	if err != nil {
		return false, fmt.Errorf("state: taking a %s lease: %w", kind, err)
	}
	return n == 1, nil
}

// ReleaseLease gives tenant's lease id of kind back (a lease not held is no error).
func (s *Leases) ReleaseLease(ctx context.Context, kind, tenant, id string) error {
	if err := s.r.ZRem(ctx, s.K.tenantLeases(kind, tenant), id).Err(); err != nil {
		return fmt.Errorf("state: releasing a %s lease: %w", kind, err)
	}
	return nil
}

// LeasesHeld counts tenant's live leases of kind.
func (s *Leases) LeasesHeld(ctx context.Context, kind, tenant string) (int, error) {
	now := time.Now().UnixMilli()
	n, err := s.r.ZCount(ctx, s.K.tenantLeases(kind, tenant), fmt.Sprint(now), "+inf").Result()
	if err != nil {
		return 0, fmt.Errorf("state: counting %s leases: %w", kind, err)
	}
	return int(n), nil
}

// AllowTenant takes one request from tenant's limit of perSecond requests with the
// given burst (the GCRA limiter engines use). It returns 0 when the request may go,
// else how long until one would.
func (s *Leases) AllowTenant(ctx context.Context, tenant string, perSecond float64, burst int) (time.Duration, error) {
	return s.allow(ctx, s.K.tenantRate(tenant), perSecond, burst)
}

// LeaseIDs lists tenant's live leases of kind (the job ids of its unfinished jobs,
// for LeaseJobs).
func (s *Leases) LeaseIDs(ctx context.Context, kind, tenant string) ([]string, error) {
	ids, err := s.r.ZRangeByScore(ctx, s.K.tenantLeases(kind, tenant), &redis.ZRangeBy{Min: fmt.Sprint(time.Now().UnixMilli()), Max: "+inf"}).Result()
	if err != nil {
		return nil, fmt.Errorf("state: listing %s leases: %w", kind, err)
	}
	return ids, nil
}
