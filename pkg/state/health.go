package state

import "context"

// Ping checks that Redis answers (the readiness probe).
func (s *Store) Ping(ctx context.Context) error {
	return s.c.r.Ping(ctx).Err()
}
