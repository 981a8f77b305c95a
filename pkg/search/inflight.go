package search

import (
	"context"
	"encoding/json"
	"time"

	"github.com/searchfleet/searchfleet/pkg/engines"
)

// Identical searches in flight are paid once, within a tenant: a search call whose
// tenant, engine and normalized query and options (queryHash) match one that another
// call is running — on this worker or any other — waits for that one's result
// instead of paying the engine again (Redis: Searches.ClaimInflight, under the
// tenant's key, so two tenants' identical searches are paid apart). The running one
// records its result for the waiters as it ends (FinishInflight) and frees its
// claim; a waiter then answers from the result, free (searches: 0), as a cache hit
// is. A search that failed records nothing: the first waiter to claim the freed
// search runs it itself. The claim expires after the longest a search can run, so a
// dead worker's claim holds no one for longer.

// inflightKeep is how long a result is kept for the searches that waited on it: long
// enough for the slowest waiter's next look.
const inflightKeep = 30 * time.Second

// inflightWait bounds the time between a waiter's looks.
const inflightWait = 500 * time.Millisecond

// inflight is a claim of a search in flight (Worker.awaitInflight).
type inflight struct {
	tenant, hash, owner string
}

// awaitInflight claims req's search among its tenant's identical ones in flight, or
// waits for the one that holds it and returns its result (nil, with the claim, when
// this call is to run the search; nil, nil when there is nothing to share).
func (w *Worker) awaitInflight(ctx context.Context, req Request, tenant, hash string) (*inflight, *engines.Result, error) {
	if w.Store == nil || tenant == "" {
		return nil, nil, nil
	}
	in := &inflight{tenant: tenant, hash: hash, owner: payCall(req)}
	ttl := w.Timeout + 5*time.Second
	pause := 25 * time.Millisecond
	for waited := false; ; waited = true {
		st, err := w.Store.ClaimInflight(ctx, tenant, req.Engine, hash, in.owner, ttl, waited)
		if err != nil {
			return nil, nil, err
		}
		if st.Claimed {
			return in, nil, nil
		}
		if st.Result != nil {
			if res, ok := cacheable(st.Result); ok {
				res.Usage = engines.Usage{Cached: 1}
				return nil, res, nil
			}
		}
		pause = min(pause*2, inflightWait)
		t := time.NewTimer(min(pause, max(st.Left, time.Millisecond)))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, nil, ctx.Err()
		}
	}
}

// endInflight ends this worker's claim of a search in flight, recording res (a
// complete result) for the searches that wait on it; nil or an incomplete result
// frees the claim alone.
func (w *Worker) endInflight(ctx context.Context, req Request, in *inflight, res *engines.Result) {
	if in == nil {
		return
	}
	var b []byte
	if Complete(res) {
		b, _ = json.Marshal(cacheEntry{At: time.Now().UTC(), Result: res})
	}
	if err := w.Store.FinishInflight(context.WithoutCancel(ctx), in.tenant, req.Engine, in.hash, in.owner, b, inflightKeep); err != nil {
		// The claim expires by itself; the waiters run their own searches then.
		w.Log.Warn("search: ending a search in flight", "engine", req.Engine, "job", req.JobID, "err", err)
	}
}
