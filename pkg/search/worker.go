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
	"slices"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/intent"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/spend"
	"github.com/searchfleet/searchfleet/pkg/state"
	"github.com/searchfleet/searchfleet/pkg/trace"
)

// Settings are one engine's operating limits.
type Settings struct {
	// PerSecond and Burst rate-limit the engine across all workers (0: unlimited).
	PerSecond float64
	Burst     int
	// CacheTTL caches results per normalized query (0: no cache).
	CacheTTL time.Duration
	// SharedCache shares the cache between tenants (the operator's choice); without
	// it each tenant's searches read and fill their own.
	SharedCache bool
	// Fallback lists the engines, in order, that take over a call this engine was
	// chosen for when it fails with a retryable, quota or auth error.
	Fallback []string
	// Google marks a Google-backed engine (intent.GoogleBacked): a call narrowed to
	// Google-preferred engines falls back only to those.
	Google bool
}

// SharedCacheTenant stands for the tenant in the keys of a cache the operator shares
// between tenants (Settings.SharedCache); no tenant id has a '*'.
const SharedCacheTenant = "*"

// Worker runs searches.
type Worker struct {
	Bus      *bus.Bus
	Store    Store
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
	// Budgets are the tenants' spend budgets (nil: spend is recorded, never refused).
	Budgets *spend.Budgets
}

// Handle runs one search. Its steps, each safe to replay:
//  1. a result stored by an earlier delivery is republished, not searched again;
//  2. a job that ended (cancelled) gets no search;
//  3. the engine's rate limit may re-queue the search with a delay (no slot held);
//  4. a lease keeps two deliveries of the same call from both paying;
//  5. the engine runs; a retryable, quota or auth failure hands the call to the
//     next engine of the call's fallback list (see handOff); with none left, a
//     retryable failure is retried with the provider's delay while deliveries
//     remain, any other failure becomes an error result;
//  6. the result is stored, then published for the chain.
//
// Engine fallback republishes the call to the fallback engine's own subject
// (fleet.search.v1.<fallback>, message id <call>:fallback-<n>) rather than running
// the fallback engine in this worker: the fallback runs under its own engine's
// consumer, concurrency, rate limit and AckWait, and a worker serving only some
// engines (FLEET_ENGINES) still falls back. The hand-off is recorded in Redis first
// (state.HandOff, first write wins), so a redelivery of the failed engine's message
// passes the call on again instead of paying that engine twice.
func (w *Worker) Handle(ctx context.Context, d *bus.Delivery[Request]) (err error) {
	req := d.Msg
	ctx, span := trace.Tool(ctx, intent.ToolName, req.Engine, req.Query.Query, req.JobID, req.CallID)
	defer func() { trace.End(span, err) }()
	eng, ok := w.Engines.Get(req.Engine)
	if !ok {
		return w.finish(ctx, req, d, engines.ErrorResult(req.Engine, req.Query.Query, &engines.Error{Kind: engines.BadRequest, Engine: req.Engine, Message: "this worker has no engine " + req.Engine}), 0)
	}
	// A search whose job's deadline has passed is not made: nothing is held for it.
	late := !req.Deadline.IsZero() && time.Now().After(req.Deadline)
	ss, err := w.Store.StartSearch(ctx, req.JobID, req.Hop, req.CallID, w.ID, w.LeaseTTL)
	if err != nil {
		return err
	}
	if ss.Done != nil {
		if done, msg, ok := storedDone(ss.Done, req.Direct); ok {
			return w.publish(ctx, req, done, msg, nil)
		}
	}
	if ss.Status == "" {
		return jobs.Orphan(w.Metrics, w.Log, bus.ConsumerSearch(req.Engine), req.JobID)
	}
	if ss.Status.Terminal() {
		return nil
	}
	if fb := ss.Fallback; fb != nil && fb.Engine != req.Engine {
		// This engine already failed the call (a redelivery): pass it on again.
		if ss.Claimed {
			w.Store.ReleaseSearch(ctx, req.JobID, req.Hop, req.CallID, w.ID)
		}
		var tried []Attempt
		if err := json.Unmarshal(fb.Tried, &tried); err != nil {
			return bus.Permanent(fmt.Errorf("search fallback state: %w", err))
		}
		return w.forward(ctx, req, fb.Engine, tried)
	}
	if !ss.Claimed {
		return bus.LeaseHeld(ss.Left, errors.New("search is being run by another worker"))
	}
	release := w.Store.KeepSearch(req.JobID, req.Hop, req.CallID, w.ID, w.LeaseTTL)
	// A step that ends in an error is retried: free the call for that delivery at once.
	// One that finished lets the claim lapse; its stored result answers any replay.
	defer func() { release(err != nil) }()

	if late {
		return w.finish(ctx, req, d, engines.ErrorResult(req.Engine, req.Query.Query, &engines.Error{Kind: engines.Unavailable, Engine: req.Engine, Message: "the job's deadline passed before the search could run"}), 0)
	}
	set := w.Settings[req.Engine]
	cacheKey := queryHash(req.Query)
	// Per tenant unless the operator shares it: a hit is free (searches: 0), which
	// must not tell one tenant what another searched for.
	cacheTenant := ss.Tenant
	if set.SharedCache {
		cacheTenant = SharedCacheTenant
	}
	if set.CacheTTL > 0 || req.Query.Cache == engines.CacheOnly {
		if res, ok := w.cached(ctx, cacheTenant, req.Engine, cacheKey, req.Query.MaxAge); ok {
			w.count(req.Engine, "cached")
			return w.finish(ctx, req, d, res, 0)
		}
		if req.Query.Cache == engines.CacheOnly {
			w.count(req.Engine, "cache_miss")
			return w.finish(ctx, req, d, engines.ErrorResult(req.Engine, req.Query.Query, &engines.Error{Kind: engines.BadRequest, Engine: req.Engine,
				Message: "no cached result for this search, and the request allows no paid search (cache: only)"}), 0)
		}
	}
	if shareable(req, ss.Tenant) {
		claimed, shared, err := w.awaitInflight(ctx, req, ss.Tenant, cacheKey)
		if err != nil {
			return err
		} else if shared != nil {
			w.count(req.Engine, "shared")
			defer trace.Searched(ctx, "shared", len(shared.Hits), 0)
			return w.finish(ctx, req, d, shared, 0)
		}
		defer w.endInflight(ctx, req, claimed, ss.Tenant, cacheKey)
	}
	// The price is held before the engine's shared rate limit is asked: a search a
	// budget refuses takes no other tenant's turn.
	held, refused, err := w.reserve(ctx, req, ss, eng)
	if err != nil {
		return err
	} else if refused != nil {
		return w.finish(ctx, req, d, refused, 0)
	}
	if wait, err := w.Store.Allow(ctx, req.Engine, set.PerSecond, set.Burst); err != nil {
		return err
	} else if wait > 0 {
		w.count(req.Engine, "rate_limited")
		return bus.RetryOrEnd(fmt.Errorf("engine %s rate limit", req.Engine), true, lastChance(d, req, wait), wait, func() error {
			w.settle(ctx, held, req.Engine, nil, errNotSearched) // a retry keeps the hold: it finds it reserved
			return w.finish(ctx, req, d, engines.ErrorResult(req.Engine, req.Query.Query, &engines.Error{Kind: engines.RateLimited, Engine: req.Engine, Message: "the engine's rate limit kept this search waiting too long"}), 0)
		})
	}

	sctx, cancel := context.WithTimeout(ctx, w.Timeout)
	start := time.Now()
	res, serr := search(sctx, eng, req)
	cancel()
	w.settle(ctx, held, req.Engine, res, serr)
	elapsed := time.Since(start)
	if w.Metrics != nil {
		trace.Observe(ctx, w.Metrics.SearchSeconds.WithLabelValues(req.Engine), elapsed.Seconds())
	}
	if serr != nil {
		if ctx.Err() != nil {
			return ctx.Err() // shutting down: another worker takes it
		}
		e := engines.AsError(req.Engine, serr)
		w.count(req.Engine, "error_"+string(e.Kind))
		if next := w.nextEngine(ctx, req, e); next != "" {
			return w.handOff(ctx, req, e, next, release)
		}
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
	if !bound(res) {
		res = tooLarge(req)
	}
	if w.Metrics != nil && res.Usage.CostUSD > 0 {
		w.Metrics.SearchCostUSD.WithLabelValues(req.Engine).Add(res.Usage.CostUSD)
	}
	if set.CacheTTL > 0 && Complete(res) && !res.Partial { // errors and partial answers are never cached
		if b, err := json.Marshal(cacheEntry{At: time.Now().UTC(), Result: res}); err == nil {
			w.Store.CacheSearch(ctx, cacheTenant, req.Engine, cacheKey, b, set.CacheTTL)
		}
	}
	return w.finish(ctx, req, d, res, elapsed)
}

// finish stores the result of a call, records it, then publishes it, in the form its
// chain reads (forChain): the stored outcome is the resume message, and the result
// it holds is the recorded search, byte for byte.
func (w *Worker) finish(ctx context.Context, req Request, d *bus.Delivery[Request], res *engines.Result, elapsed time.Duration) error {
	if !bound(res) { // a cached result was bounded when it was cached; this keeps it so
		res = tooLarge(req)
	}
	done := Done{JobID: req.JobID, Hop: req.Hop, CallID: req.CallID, Engine: req.origin(), Result: *res, Attempts: d.Attempt, Millis: elapsed.Milliseconds(), Worker: w.ID}
	if len(req.Tried) > 0 {
		done.Fallback = &Fallback{From: req.origin(), Engine: req.Engine, Tried: req.Tried}
	}
	if req.Direct {
		engines.Render(&done.Result) // a cached result may be a chain's, stored without it
	} else {
		forChain(&done.Result)
	}
	trace.Searched(ctx, searchOutcome(res), len(res.Hits), res.Usage.CostUSD)
	rb, err := json.Marshal(&done.Result)
	if err != nil {
		return bus.Permanent(fmt.Errorf("search: encoding a result: %w", err))
	}
	msg, err := saveDone(ctx, w.Store, w.LeaseTTL, req.Direct, &done, recording(req, &done.Result, rb))
	if err != nil {
		return err
	}
	return w.publish(ctx, req, &done, msg, rb)
}

// search runs req's query on eng. A chain's search leaves the model's text
// unrendered, as forChain would drop it.
func search(ctx context.Context, eng engines.Engine, req Request) (*engines.Result, error) {
	if req.Direct {
		return eng.Search(ctx, req.Query)
	}
	return engines.SearchStructured(ctx, eng, req.Query)
}

// forChain drops from a result what its chain does not read: the chat worker renders
// the model's text from the structured result (with the chain's numbering), so the
// rendered text would only be carried and stored twice. An error result keeps its
// text: it is what the model reads.
func forChain(res *engines.Result) {
	if res.Citation.Error == nil {
		res.Citation.LLMContent = ""
	}
}

// fallbackReason reports whether another engine may mend e: the engine is busy or
// down (rate_limited, unavailable), or its account or key cannot pay (quota, auth).
// A bad request or an unreadable answer would fail the same way elsewhere.
func fallbackReason(e *engines.Error) bool {
	return e.Retryable() || e.Kind == engines.Quota || e.Kind == engines.Auth
}

// nextEngine picks the engine that takes over a call req.Engine failed with e: the
// first engine of the call's fallback list (the list of the engine the call was made
// for) not tried yet, keeping to Google-backed engines when the call was narrowed to
// them, and passing over engines whose keys are all cooling down (a search there
// would fail without a request); "" when none is left or e is not a reason to fall
// back.
func (w *Worker) nextEngine(ctx context.Context, req Request, e *engines.Error) string {
	if !fallbackReason(e) {
		return ""
	}
	origin := req.origin()
	set := w.Settings[origin]
	google := req.GooglePreferred && set.Google
	for _, id := range set.Fallback {
		if id == origin || id == req.Engine || slices.ContainsFunc(req.Tried, func(a Attempt) bool { return a.Engine == id }) {
			continue
		}
		if _, ok := w.Engines.Get(id); !ok || google && !w.Settings[id].Google {
			continue
		}
		if _, resting := w.Engines.Resting(ctx, id); resting {
			continue
		}
		return id
	}
	return ""
}

// handOff records that req.Engine failed the call with e and that next runs it now,
// frees the call's lease for next's worker, and publishes the call to next's subject.
// If a racing delivery handed the call off first, its hand-off stands and is
// published again (the stream drops the duplicate).
func (w *Worker) handOff(ctx context.Context, req Request, e *engines.Error, next string, release func(bool)) error {
	tried := append(slices.Clone(req.Tried), Attempt{Engine: req.Engine, Reason: string(e.Kind)})
	b, err := json.Marshal(tried)
	if err != nil {
		return bus.Permanent(err)
	}
	fb, err := w.Store.HandOff(ctx, req.JobID, req.Hop, req.CallID, req.Engine, next, b)
	if err != nil {
		return err
	}
	if fb.Engine == next {
		if w.Metrics != nil {
			w.Metrics.SearchFallbacks.WithLabelValues(req.Engine, next, string(e.Kind)).Inc()
		}
		w.Log.Info("search: falling back", "engine", req.Engine, "to", next, "reason", string(e.Kind), "job", req.JobID, "call", req.CallID)
	} else if err := json.Unmarshal(fb.Tried, &tried); err != nil {
		return bus.Permanent(fmt.Errorf("search fallback state: %w", err))
	}
	release(true)
	return w.forward(ctx, req, fb.Engine, tried)
}

// forward publishes req's call for engine, after the failed attempts tried.
func (w *Worker) forward(ctx context.Context, req Request, engine string, tried []Attempt) error {
	fr := req
	fr.Origin, fr.Engine, fr.Tried = req.origin(), engine, tried
	return w.Bus.Publish(ctx, bus.SubjectSearchOf(engine, fr.Band, fr.Tenant), fr)
}

// publish sends a finished search on: to its chain (msg is the resume message as
// saveDone stored it), or, for a direct search, into the job record itself (rb is
// the result's JSON; nil to encode it).
func (w *Worker) publish(ctx context.Context, req Request, done *Done, msg, rb []byte) error {
	if !req.Direct {
		return w.Bus.Publish(ctx, bus.SubjectResumeOf(req.Band, req.Tenant), bus.Sealed{Payload: *done, Envelope: msg})
	}
	return w.completeDirect(ctx, req, &done.Result, rb)
}

// directResult is the response of a direct search job.
type directResult struct {
	ID     string          `json:"id"`
	Object string          `json:"object"`
	Result json.RawMessage `json:"result"`
}

// completeDirect ends a direct search job (POST /v1/search) with its result res (rb
// its JSON, nil to encode it).
func (w *Worker) completeDirect(ctx context.Context, req Request, res *engines.Result, rb []byte) error {
	if rb == nil {
		var err error
		if rb, err = json.Marshal(res); err != nil {
			return bus.Permanent(fmt.Errorf("search: encoding a result: %w", err))
		}
	}
	b, _ := json.Marshal(directResult{ID: req.JobID, Object: "search.result", Result: rb})
	ub, _ := json.Marshal(res.Usage)
	end := jobs.Ending{Status: state.Completed, Response: b, Usage: ub}
	if e := res.Citation.Error; e != nil {
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

// searchOutcome is how a finished search was answered, for its span: "error" (the
// model reads why), "cached" or "paid".
func searchOutcome(res *engines.Result) string {
	switch {
	case res.Citation.Error != nil:
		return "error"
	case res.Usage.Cached > 0:
		return "cached"
	}
	return "paid"
}

func (w *Worker) count(engine, outcome string) {
	if w.Metrics != nil {
		w.Metrics.Searches.WithLabelValues(engine, outcome).Inc()
	}
}

// queryHash identifies a normalized query for the cache: what the engine searches,
// without what only says how to use the cache (max_age, cache) or whether to refuse
// (strict).
func queryHash(q engines.Query) string {
	q.MaxAge, q.Cache, q.Strict = nil, "", false
	b, _ := json.Marshal(q)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// cacheEntry is a cached result with the time it was stored; an entry without At
// (stored before entries had it) is of unknown age.
type cacheEntry struct {
	At time.Time `json:"cached_at,omitzero"`
	*engines.Result
}

// cached returns the tenant's cached result for engine and key, when there is one
// no older than maxAge seconds (nil: any age the cache kept). A hit costs nothing.
func (w *Worker) cached(ctx context.Context, tenant, engine, key string, maxAge *int) (*engines.Result, bool) {
	if maxAge != nil && *maxAge == 0 {
		return nil, false // a paid search, whatever is cached
	}
	b, err := w.Store.CachedSearch(ctx, tenant, engine, key)
	if err != nil {
		return nil, false
	}
	res, ok := cacheable(b)
	if !ok {
		return nil, false
	}
	if maxAge != nil {
		var e struct {
			At time.Time `json:"cached_at"`
		}
		if json.Unmarshal(b, &e) != nil || e.At.IsZero() || time.Since(e.At) > time.Duration(*maxAge)*time.Second {
			return nil, false
		}
	}
	res.Usage = engines.Usage{Cached: 1}
	return res, true
}

// saveDone stores a call's outcome (done) under its lease, with its
// recorded result rec (nil: none), before it is published, and returns what
// publishing sends: a chain's call's outcome is stored as its chain's result, in the
// form of the resume message that carries it (its envelope sealed here, so the chat
// worker reads the stored bytes as it reads the message, and writes nothing); a
// direct search's as the Done alone. The call is paid for (a search) or done (a
// fetch): storing it is worth riding out a Redis restart (a few seconds, while the
// worker still holds the call's lease), or a redelivery would find no result and pay
// or fetch again.
func saveDone(ctx context.Context, st Calls, leaseTTL time.Duration, direct bool, done *Done, rec *state.Recording) ([]byte, error) {
	save, b, err := st.SaveSearchDone, []byte(nil), error(nil)
	if direct {
		b, err = json.Marshal(done)
	} else {
		var sealed bus.Sealed
		sealed, err = bus.Seal(*done) // sealed once: stored, and published, as these bytes
		save, b = st.SaveSearchResult, sealed.Envelope
	}
	if err != nil {
		return nil, bus.Permanent(fmt.Errorf("search: encoding a result: %w", err))
	}
	return b, state.Persist(ctx, min(leaseTTL/2, 15*time.Second), func() error {
		return save(ctx, done.JobID, done.Hop, done.CallID, b, rec)
	})
}

// storedDone reads a call's stored outcome (state.SearchStart.Done) and returns it
// with what publishing it sends (see saveDone): a chain's is its resume message, a
// direct search's the Done alone (either is read when direct: an identical call
// waited on may be of either kind).
func storedDone(b []byte, direct bool) (*Done, []byte, bool) {
	if d, _, err := bus.Decode[Done](b); err == nil {
		return &d, b, true
	}
	var d Done
	if !direct || json.Unmarshal(b, &d) != nil {
		return nil, nil, false
	}
	return &d, b, true
}
