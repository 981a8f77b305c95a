package state

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// The recorded search results of jobs and batches, by content address (see
// search.Address). The first result recorded under an address stays: a replay finds
// exactly what the job was first given.

// RecordSearch records a complete search result of a job under its content address,
// and under its batch's when the job belongs to one, each kept for the retention. The
// job's batch is read from its record unless this process knows it (jobBatches).
func (s *Store) RecordSearch(ctx context.Context, jobID, addr string, result []byte) error {
	batch, ok := s.batches.get(jobID)
	var err error
	if !ok {
		batch, err = s.r.HGet(ctx, s.K.Job(jobID), "batch").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("state: recording a search: %w", err)
		}
	}
	_, err = s.r.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range s.recordKeys(jobID, batch) {
			p.HSetNX(ctx, k, addr, result)
			p.PExpire(ctx, k, s.Retention)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("state: recording a search: %w", err)
	}
	return nil
}

func (s *Store) recordKeys(jobID, batchID string) []string {
	keys := []string{s.K.SearchRecord(jobID)}
	if batchID != "" {
		keys = append(keys, s.K.BatchSearchRecord(batchID))
	}
	return keys
}

// RecordedSearches returns all of a job's recorded results by content address (none
// for a job that recorded none, or whose record expired): from Redis while the job
// is hot, from its archived record once it has ended.
func (s *Store) RecordedSearches(ctx context.Context, jobID string) (map[string][]byte, error) {
	m, err := s.r.HGetAll(ctx, s.K.SearchRecord(jobID)).Result()
	if err != nil {
		return nil, fmt.Errorf("state: reading recorded searches: %w", err)
	}
	if len(m) == 0 {
		rec, err := s.archived(ctx, jobID, false)
		if err != nil {
			return nil, err
		}
		if rec != nil {
			m = rec.Searches
		}
	}
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = []byte(v)
	}
	return out, nil
}

// RecordedSearch looks each of addrs up among a job's recorded results, then among
// its batch's (batchID "" for none), in one round trip. It returns the results found
// by address; inBatch names those found only in the batch's.
func (s *Store) RecordedSearch(ctx context.Context, jobID, batchID string, addrs []string) (found map[string][]byte, inBatch map[string]bool, err error) {
	if len(addrs) == 0 {
		return nil, nil, nil
	}
	keys := s.recordKeys(jobID, batchID)
	cmds := make([]*redis.SliceCmd, len(keys))
	_, err = s.r.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.HMGet(ctx, k, addrs...)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("state: reading recorded searches: %w", err)
	}
	found, inBatch = map[string][]byte{}, map[string]bool{}
	for i, c := range cmds {
		for j, v := range c.Val() {
			str, ok := v.(string)
			if !ok || found[addrs[j]] != nil {
				continue
			}
			found[addrs[j]] = []byte(str)
			inBatch[addrs[j]] = i > 0
		}
	}
	return found, inBatch, nil
}
