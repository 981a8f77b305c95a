package state

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// CachedSearch reads a tenant's cached result of an engine for a query (by its
// hash); ErrNotFound when none is cached.
func (s *Searches) CachedSearch(ctx context.Context, tenant, engine, queryHash string) ([]byte, error) {
	b, err := s.r.Get(ctx, s.K.searchCache(tenant, engine, queryHash)).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("state: reading the search cache: %w", err)
	}
	return b, nil
}

// CacheSearch caches a tenant's result of an engine for a query (by its hash) for
// ttl. Only that tenant's searches read it (Keys.searchCache).
func (s *Searches) CacheSearch(ctx context.Context, tenant, engine, queryHash string, result []byte, ttl time.Duration) error {
	if err := s.r.Set(ctx, s.K.searchCache(tenant, engine, queryHash), result, ttl).Err(); err != nil {
		return fmt.Errorf("state: caching a search: %w", err)
	}
	return nil
}
