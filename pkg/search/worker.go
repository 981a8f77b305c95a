// Package search is the search worker: it takes web_search calls off an engine's
// subject, runs them with the engine's shared rate limit, optional cache and timeout,
// and publishes the normalized result for the chain to resume. A failed search is a
// result too — the model is told, in words it can act on — never a stuck job.
package search

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Settings are one engine's operating limits.
type Settings struct {
	// PerSecond and Burst rate-limit the engine across all workers (0: unlimited).
	PerSecond float64
	Burst     int
	// CacheTTL caches results per normalized query (0: no cache).
	CacheTTL time.Duration
}

// Worker runs searches.
type Worker struct {
	Bus      *bus.Bus
	Store    *state.Store
	Engines  *engines.Registry
	Settings map[string]Settings
	// Timeout bounds one engine call.
	Timeout time.Duration
	// LeaseTTL is how long a dead worker's claim on a search blocks the next one; a
	// live worker renews its claim. It should match the consumer's AckWait.
	LeaseTTL time.Duration
	// Ender ends direct search jobs.
	Ender   *jobs.Ender
	Metrics *metrics.Metrics
	Log     *slog.Logger
	// ID names this worker in leases.
	ID string
}

// Handle runs one search. Its steps, each safe to replay:
//  1. a result stored by an earlier delivery is republished, not searched again;
//  2. a job that ended (cancelled) gets no search;
//  3. the engine's rate limit may re-queue the search with a delay (no slot held);
//  4. a lease keeps two deliveries of the same call from both paying;
//  5. the engine runs; a retryable failure is retried with the provider's delay
//     while deliveries remain, any other failure becomes an error result;
//  6. the result is stored, then published for the chain.
func (w *Worker) Handle(ctx context.Context, d *bus.Delivery[Request]) (err error) {
	req := d.Msg
	eng, ok := w.Engines.Get(req.Engine)
	if !ok {
		return w.finish(ctx, req, d, engines.ErrorResult(req.Engine, req.Query.Query, &engines.Error{Kind: engines.BadRequest, Engine: req.Engine, Message: "this worker has no engine " + req.Engine}), 0)
	}
	ss, err := w.Store.StartSearch(ctx, req.JobID, req.Hop, req.CallID, w.ID, w.LeaseTTL)
	if err != nil {
		return err
	}
	if ss.Done != nil {
		var done Done
		if json.Unmarshal(ss.Done, &done) == nil {
			return w.publish(ctx, req, done)
		}
	}
	if ss.Status == "" {
		return jobs.Orphan(w.Metrics, w.Log, bus.ConsumerSearch(req.Engine), req.JobID)
	}
	if ss.Status.Terminal() {
		return nil
	}
	if !ss.Claimed {
		return bus.LeaseHeld(ss.Left, errors.New("search is being run by another worker"))
	}
	release := w.Store.KeepAlive(w.Store.K.SearchLease(req.JobID, req.Hop, req.CallID), w.ID, w.LeaseTTL)
	// A step that ends in an error is retried: free the call for that delivery at once.
	// One that finished lets the claim lapse; its stored result answers any replay.
	defer func() { release(err != nil) }()

	if !req.Deadline.IsZero() && time.Now().After(req.Deadline) {
		return w.finish(ctx, req, d, engines.ErrorResult(req.Engine, req.Query.Query, &engines.Error{Kind: engines.Unavailable, Engine: req.Engine, Message: "the job's deadline passed before the search could run"}), 0)
	}
	set := w.Settings[req.Engine]
	cacheKey := ""
	if set.CacheTTL > 0 {
		cacheKey = queryHash(req.Query)
		if b, err := w.Store.CachedSearch(ctx, req.Engine, cacheKey); err == nil {
			if res, ok := cacheable(b); ok {
				w.count(req.Engine, "cached")
				res.Usage = engines.Usage{} // a cached answer costs nothing
				return w.finish(ctx, req, d, res, 0)
			}
		}
	}
	if wait, err := w.Store.Allow(ctx, req.Engine, set.PerSecond, set.Burst); err != nil {
		return err
	} else if wait > 0 {
		w.count(req.Engine, "rate_limited")
		return bus.RetryOrEnd(fmt.Errorf("engine %s rate limit", req.Engine), true, lastChance(d, req, wait), wait, func() error {
			return w.finish(ctx, req, d, engines.ErrorResult(req.Engine, req.Query.Query, &engines.Error{Kind: engines.RateLimited, Engine: req.Engine, Message: "the engine's rate limit kept this search waiting too long"}), 0)
		})
	}

	sctx, cancel := context.WithTimeout(ctx, w.Timeout)
	start := time.Now()
	res, serr := eng.Search(sctx, req.Query)
	cancel()
	elapsed := time.Since(start)
	if w.Metrics != nil {
		w.Metrics.SearchSeconds.WithLabelValues(req.Engine).Observe(elapsed.Seconds())
	}
	if serr != nil {
		if ctx.Err() != nil {
			return ctx.Err() // shutting down: another worker takes it
		}
		e := engines.AsError(req.Engine, serr)
		w.count(req.Engine, "error_"+string(e.Kind))
		after := e.RetryAfter
		if after <= 0 {
			after = bus.Backoff(d.Attempt)
		}
		return bus.RetryOrEnd(e, e.Retryable(), lastChance(d, req, after), after, func() error {
			w.Log.Warn("search: failed", "engine", req.Engine, "job", req.JobID, "attempt", d.Attempt, "err", e)
			return w.finish(ctx, req, d, engines.ErrorResult(req.Engine, req.Query.Query, e), elapsed)
		})
	}
	w.count(req.Engine, "ok")
	if w.Metrics != nil && res.Usage.CostUSD > 0 {
		w.Metrics.SearchCostUSD.WithLabelValues(req.Engine).Add(res.Usage.CostUSD)
	}
	if cacheKey != "" && Complete(res) {
		if b, err := json.Marshal(res); err == nil {
			w.Store.CacheSearch(ctx, req.Engine, cacheKey, b, set.CacheTTL)
		}
	}
	return w.finish(ctx, req, d, res, elapsed)
}

// finish stores the result of a call, then publishes it.
func (w *Worker) finish(ctx context.Context, req Request, d *bus.Delivery[Request], res *engines.Result, elapsed time.Duration) error {
	done := Done{JobID: req.JobID, Hop: req.Hop, CallID: req.CallID, Engine: req.Engine, Result: *res, Attempts: d.Attempt, Millis: elapsed.Milliseconds(), Worker: w.ID}
	b, err := json.Marshal(done)
	if err != nil {
		return bus.Permanent(err)
	}
	// The search is paid for: storing its result is worth riding out a Redis restart
	// (a few seconds, while this worker still holds the call's lease), or a
	// redelivery would find no result and pay again.
	if err := state.Persist(ctx, min(w.LeaseTTL/2, 15*time.Second), func() error {
		return w.Store.SaveSearchDone(ctx, req.JobID, req.Hop, req.CallID, b)
	}); err != nil {
		return err
	}
	w.record(ctx, req, res)
	return w.publish(ctx, req, done)
}

// publish sends a finished search on: to its chain, or, for a direct search, into the
// job record itself.
func (w *Worker) publish(ctx context.Context, req Request, done Done) error {
	if !req.Direct {
		// The chat worker renders the model's text from the structured result (with
		// the chain's numbering); the rendered text would only be carried and stored
		// twice. Error results keep theirs: it is what the model reads.
		if done.Result.Citation.Error == nil {
			done.Result.Citation.LLMContent = ""
		}
		return w.Bus.Publish(ctx, bus.SubjectResume, done)
	}
	return w.completeDirect(ctx, req, done)
}

// completeDirect ends a direct search job (POST /v1/search) with its result.
func (w *Worker) completeDirect(ctx context.Context, req Request, done Done) error {
	b, _ := json.Marshal(map[string]any{"object": "search.result", "id": req.JobID, "result": done.Result})
	ub, _ := json.Marshal(done.Result.Usage)
	end := jobs.Ending{Status: state.Completed, Response: b, Usage: ub}
	if e := done.Result.Citation.Error; e != nil {
		end = jobs.Ending{Status: state.Failed, Error: jobs.SearchFailed(e.Type, e.Message), Response: b, Usage: ub}
	}
	return w.Ender.End(ctx, req.JobID, end)
}

// lastChance reports whether a search that would wait after to retry must instead end
// now: its message's last delivery, or a retry that would land past the job's deadline
// (the model then answers with the failure, instead of the job missing its deadline).
func lastChance(d *bus.Delivery[Request], req Request, after time.Duration) bool {
	return d.Last() || !req.Deadline.IsZero() && time.Now().Add(after).After(req.Deadline)
}

func (w *Worker) count(engine, outcome string) {
	if w.Metrics != nil {
		w.Metrics.Searches.WithLabelValues(engine, outcome).Inc()
	}
}

// queryHash identifies a normalized query for the cache.
func queryHash(q engines.Query) string {
	b, _ := json.Marshal(q)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}
