package batch

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/searchfleet/searchfleet/internal/httpx"
)

// list is an OpenAI list page.
type list[T any] struct {
	Object  string  `json:"object"`
	Data    []T     `json:"data"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
	HasMore bool    `json:"has_more"`
}

func listOf[T any](data []T, id func(T) string, more bool) list[T] {
	l := list[T]{Object: "list", Data: data, HasMore: more}
	if len(data) > 0 {
		first, last := id(data[0]), id(data[len(data)-1])
		l.FirstID, l.LastID = &first, &last
	}
	return l
}

// listLimit reads a list's limit parameter (1..most, default def); it has answered
// when it returns false.
func listLimit(w http.ResponseWriter, v string, def, most int) (int, bool) {
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		httpx.WriteError(w, http.StatusBadRequest, "invalid_request_error", "", "limit", fmt.Sprintf("limit must be an integer from 1 to %d", most))
		return 0, false
	}
	return n, true
}

// pageSize is how many members of an index one round trip reads while paging.
const pageSize = 200

// page lists the members of a tenant's index (a sorted set by creation time), newest
// first unless asc, starting after the member after, as load turns them into items
// (load's keep drops a member: filtered out, or its record expired). It returns up to
// limit items and whether more follow.
func page[T any](ctx context.Context, s *Service, zkey, after string, limit int, asc bool,
	load func(ctx context.Context, id string) (T, bool, error)) ([]T, bool, error) {
	start := int64(0)
	if after != "" {
		rank := s.Store.R.ZRevRank
		if asc {
			rank = s.Store.R.ZRank
		}
		r, err := rank(ctx, zkey, after).Result()
		if err != nil {
			return nil, false, nil // an unknown cursor: nothing after it
		}
		start = r + 1
	}
	out := []T{}
	for {
		rng := s.Store.R.ZRevRange
		if asc {
			rng = s.Store.R.ZRange
		}
		ids, err := rng(ctx, zkey, start, start+pageSize-1).Result()
		if err != nil {
			return nil, false, err
		}
		for _, id := range ids {
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
		if len(ids) < pageSize {
			return out, false, nil
		}
		start += pageSize
	}
}
