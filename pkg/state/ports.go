package state

import (
	"context"
	"time"
)

// Leases of search and fetch calls, named by call rather than by key, for the ports
// the search workers declare (search.Calls).

// KeepSearch keeps owner's lease of call (hop h of job id) alive until the returned
// function is called; with drop set, that also frees the lease (see KeepAlive).
func (s *Store) KeepSearch(id string, h int, call, owner string, ttl time.Duration) func(drop bool) {
	return s.KeepAlive(s.K.SearchLease(id, h, call), owner, ttl)
}

// ReleaseSearch frees owner's lease of call (hop h of job id) at once.
func (s *Store) ReleaseSearch(ctx context.Context, id string, h int, call, owner string) error {
	return s.Release(ctx, s.K.SearchLease(id, h, call), owner)
}
