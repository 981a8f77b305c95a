package batch

import (
	"context"
	"iter"
)

// page reads ids from a tenant's index (state.Store.TenantBatches, TenantFiles) as
// load turns them into items (load's keep drops an id: filtered out, or its record
// expired). It returns up to limit items and whether more follow.
func page[T any](ctx context.Context, ids iter.Seq2[string, error], limit int,
	load func(ctx context.Context, id string) (T, bool, error)) ([]T, bool, error) {
	out := []T{}
	for id, err := range ids {
		if err != nil {
			return nil, false, err
		}
		item, keep, err := load(ctx, id)
		if err != nil {
			return nil, false, err
		}
		if !keep {
			continue
		}
		if len(out) == limit {
			return out, true, nil
		}
		out = append(out, item)
	}
	return out, false, nil
}
