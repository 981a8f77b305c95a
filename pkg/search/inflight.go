package search

import (
	"context"
	"time"

	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Identical searches in flight are paid once, within a tenant: a search call whose
// tenant, engine and normalized query and options (queryHash) match one that another
// call is running — on this worker or any other — waits for that call's outcome
// instead of paying the engine again. The running call claims the search in Redis
// (Searches.ClaimInflight: one SET NX, under the tenant's key, so two tenants'
// identical searches are paid apart), stores its outcome as every call does, then
// frees the claim. An identical call finds the claim, reads the holder's stored
// outcome (CallOutcome: the outcome, or the result the holder's job recorded, which
// outlives the outcome once the holder's chain has read it, and its archived record's
// once the holder's job has ended) and, while there is none, looks again; a complete result
// answers it free (searches: 0), as a cache hit does. A failed outcome, or a holder's
// job gone, is no use: the waiter takes the claim over and runs the search itself.
// The claim expires after the longest a search can run, so a dead worker's claim
// holds no one longer.

// inflightWait bounds the time between a waiter's looks.
const inflightWait = 500 * time.Millisecond

// shareable reports whether req may be answered by an identical search: not one
// that asks for a paid search whatever is known (max_age 0).
func shareable(req Request, tenant string) bool {
	return tenant != "" && (req.Query.MaxAge == nil || *req.Query.MaxAge > 0)
}

// awaitInflight claims req's search among its tenant's identical ones in flight, or
// waits for the call that holds it and returns that call's result; claimed reports a
// claim this call frees when it is done (endInflight).
func (w *Worker) awaitInflight(ctx context.Context, req Request, tenant, hash string) (claimed bool, shared *engines.Result, err error) {
	ttl := w.Timeout + 5*time.Second
	pause := 25 * time.Millisecond
	var holder *state.Inflight // the call waited on, once known
	prev := ""
	for {
		if holder != nil {
			// Before the claim is tried again: a holder that has ended freed it, and its
			// outcome is stored before that.
			res, useless, err := w.heldOutcome(ctx, req, holder)
			if err != nil || res != nil {
				return false, res, err
			}
			if useless {
				prev = holder.Holder() // failed, or gone: no use to wait on
			}
		}
		st, err := w.Store.ClaimInflight(ctx, tenant, req.Engine, hash, req.JobID, req.Hop, req.CallID, ttl, prev)
		if err != nil {
			return false, nil, err
		}
		if holder != nil && prev == "" && (st.Claimed || holder.Holder() != st.Holder()) {
			// The holder ended between the look above and the claim: its outcome is
			// stored by now.
			res, _, err := w.heldOutcome(ctx, req, holder)
			if err == nil && res != nil {
				w.endInflight(ctx, req, st.Claimed, tenant, hash)
				return false, res, nil
			}
		}
		if st.Claimed {
			return true, nil, nil
		}
		prev = ""
		if holder != nil && holder.Holder() == st.Holder() {
			pause = min(pause*2, inflightWait)
			t := time.NewTimer(min(pause, max(st.Left, time.Millisecond)))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return false, nil, ctx.Err()
			}
		}
		holder = &st
	}
}

// heldOutcome is the result of holder's search when it has a complete one (free:
// searches 0), or useless when it failed or its job is gone.
func (w *Worker) heldOutcome(ctx context.Context, req Request, holder *state.Inflight) (res *engines.Result, useless bool, err error) {
	addr := Address(req.origin(), req.Query)
	b, rec, live, err := w.Store.CallOutcome(ctx, holder.Job, holder.Hop, holder.Call, addr)
	if err != nil {
		return nil, false, err
	}
	if b == nil && rec == nil && !live {
		// A holder whose job has ended since (an answer soon follows its search): its
		// recorded result is in its archived record.
		all, err := w.Store.RecordedSearches(ctx, holder.Job)
		if err != nil {
			return nil, false, err
		}
		rec = all[addr]
	}
	// The holder's recorded result first: its outcome leaves the job's hash once its
	// chain has read it.
	if r, ok := cacheable(rec); rec != nil && ok {
		r.Usage = engines.Usage{Cached: 1}
		return r, false, nil
	}
	if b == nil && live {
		return nil, false, nil // still running
	}
	if d, _, ok := storedDone(b, true); ok && Complete(&d.Result) {
		r := d.Result
		r.Usage = engines.Usage{Cached: 1}
		return &r, false, nil
	}
	return nil, true, nil
}

// endInflight frees this call's claim of a search once its outcome is stored (or it
// has none), so the identical searches waiting on it read it, or run their own.
func (w *Worker) endInflight(ctx context.Context, req Request, claimed bool, tenant, hash string) {
	if !claimed {
		return
	}
	if err := w.Store.ReleaseInflight(context.WithoutCancel(ctx), tenant, req.Engine, hash, req.JobID, req.Hop, req.CallID); err != nil {
		// The claim expires by itself; the waiters run their own searches then.
		w.Log.Warn("search: freeing a search in flight", "engine", req.Engine, "job", req.JobID, "err", err)
	}
}
