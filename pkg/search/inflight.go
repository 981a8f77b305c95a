package search

import (
	"context"
	"time"

	"github.com/searchfleet/searchfleet/pkg/engines"
)

// Identical searches are paid once, within a tenant: a search call whose tenant,
// engine and normalized query and options (queryHash) match one that another call
// started within the engine timeout — on this worker or any other — answers from that
// call's outcome instead of paying the engine again, waiting for it while it runs.
// The first call claims the search in Redis (Searches.ClaimInflight: one SET NX,
// under the tenant's key, so two tenants' identical searches are paid apart) and
// stores its outcome as every call does; an identical call finds the claim, reads the
// holder's stored outcome (CallOutcome) and, while there is none, looks again. A
// complete result answers it free (searches: 0), as a cache hit does. A holder whose
// search failed frees its claim, and a waiter that finds a failed outcome or a
// holder's job gone takes the claim over and runs the search itself. The claim
// expires after the longest a search can run, so a dead worker holds no one longer.

// inflightWait bounds the time between a waiter's looks.
const inflightWait = 500 * time.Millisecond

// shareable reports whether req may be answered by an identical search: not one
// that asks for a paid search whatever is known (max_age 0).
func shareable(req Request, tenant string) bool {
	return tenant != "" && (req.Query.MaxAge == nil || *req.Query.MaxAge > 0)
}

// awaitInflight claims req's search among its tenant's identical ones, or waits for
// the call that holds it and returns that call's result; claimed reports a claim
// this call must free if its search fails (endInflight).
func (w *Worker) awaitInflight(ctx context.Context, req Request, tenant, hash string) (claimed bool, shared *engines.Result, err error) {
	ttl := w.Timeout + 5*time.Second
	pause := 25 * time.Millisecond
	prev := ""
	for {
		st, err := w.Store.ClaimInflight(ctx, tenant, req.Engine, hash, req.JobID, req.Hop, req.CallID, ttl, prev)
		if err != nil || st.Claimed {
			return st.Claimed, nil, err
		}
		b, live, err := w.Store.CallOutcome(ctx, st.Job, st.Hop, st.Call)
		if err != nil {
			return false, nil, err
		}
		if b != nil || !live {
			if d, _, ok := storedDone(b, true); ok && Complete(&d.Result) {
				res := d.Result
				res.Usage = engines.Usage{Cached: 1}
				return false, &res, nil
			}
			prev = st.Holder() // failed, or gone: no use to wait on
			continue
		}
		prev = ""
		pause = min(pause*2, inflightWait)
		t := time.NewTimer(min(pause, max(st.Left, time.Millisecond)))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false, nil, ctx.Err()
		}
	}
}

// endInflight frees this call's claim of a search that did not end in a complete
// result, so an identical search waiting on it runs its own at once. A complete
// result keeps the claim: its stored outcome answers the identical searches.
func (w *Worker) endInflight(ctx context.Context, req Request, claimed bool, tenant, hash string, res *engines.Result) {
	if !claimed || Complete(res) {
		return
	}
	if err := w.Store.ReleaseInflight(context.WithoutCancel(ctx), tenant, req.Engine, hash, req.JobID, req.Hop, req.CallID); err != nil {
		// The claim expires by itself; the waiters run their own searches then.
		w.Log.Warn("search: freeing a search in flight", "engine", req.Engine, "job", req.JobID, "err", err)
	}
}
