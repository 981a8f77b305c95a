package state

import (
	"context"
	"iter"
)

// indexPage is how many members of a tenant's index one round trip reads.
const indexPage = 200

// TenantBatches iterates over a tenant's batch ids, newest first, from the one after
// the id after (all of them when after is ""; none when after is not in the list).
// Ids of batches that expired may still be listed: drop them with ForgetTenantBatch.
func (s *Batches) TenantBatches(ctx context.Context, tenant, after string) iter.Seq2[string, error] {
	return s.index(ctx, s.K.TenantBatches(tenant), after, false, 0)
}

// TenantFiles iterates over a tenant's file ids, newest first unless asc, from the one
// after the id after (all when after is ""; none when after is not in the list).
func (s *Files) TenantFiles(ctx context.Context, tenant, after string, asc bool) iter.Seq2[string, error] {
	return s.index(ctx, s.K.TenantFiles(tenant), after, asc, 0)
}

// index iterates over the members of a sorted set by creation time, a page of
// indexPage per round trip; only the first kept in that order when kept > 0 (an
// index trimmed now and then may hold a few more).
func (s *core) index(ctx context.Context, key, after string, asc bool, kept int64) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		start := int64(0)
		if after != "" {
			rank := s.r.ZRevRank
			if asc {
				rank = s.r.ZRank
			}
			r, err := rank(ctx, key, after).Result()
			if err != nil {
				return // an unknown cursor: nothing after it
			}
			start = r + 1
		}
		for kept <= 0 || start < kept {
			end := start + indexPage - 1
			if kept > 0 {
				end = min(end, kept-1)
			}
			rng := s.r.ZRevRange
			if asc {
				rng = s.r.ZRange
			}
			ids, err := rng(ctx, key, start, end).Result()
			if err != nil {
				yield("", err)
				return
			}
			for _, id := range ids {
				if !yield(id, nil) {
					return
				}
			}
			if int64(len(ids)) < end-start+1 {
				return
			}
			start = end + 1
		}
	}
}
