// Package chat is the chat worker: it runs each job's chain — intent, tool injection,
// the main-model call, server-tool dispatch, resume, the final answer — as a state
// machine whose state lives in a ChainStore (Redis: pkg/state), so any worker can take
// any step of any chain and a redelivered step finds its work already recorded.
//
// Each step reads a hop's stored view in one round trip, and next (phase.go), a pure
// function, says what to do: call the model, dispatch searches, wait, complete or fail.
// Every ending goes through Worker.end. The steps, per hop h of a job:
//
//  1. advance(h): if hop h's model answer is stored, use it; else take the hop's lease,
//     call the model, store its answer (first write wins). No paid call is repeated.
//  2. The answer has web_search calls: validate each (a rejected call gets an error
//     result the model reads), record the calls, publish one search per call
//     (Nats-Msg-Id job:hop:call), mark the hop dispatched.
//  3. A search result arrives (resume): record it atomically; the result that
//     completes the hop's set runs advance(h+1).
//  4. The answer has no server calls: store the response, mark the job completed,
//     publish "completed". Client tool calls end the job the same way: they are the
//     client's to run.
package chat

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/intent"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/search"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Model is a main model: the caller that reaches its provider (in the provider's
// protocol) and its upstream name.
type Model struct {
	Provider string
	Client   ModelCaller
	Upstream string
	// Protocol is the protocol the provider speaks (its config "protocol"): the job's
	// usage record names it.
	Protocol string
	// NativeSearch says the model runs its provider's own search in place of the
	// fleet's web_search (its config "webSearch": "native" or "auto").
	NativeSearch bool
	// Pricing prices the model's turns for the spend ledgers (zero: free).
	Pricing state.Pricing
}

// Worker runs chat chains. It holds no job state between messages.
type Worker struct {
	// Bus carries the chain's messages; Store keeps its state between steps.
	Bus    Publisher
	Store  ChainStore
	Models map[string]Model
	// Tools is the web_search toolset (nil: web search disabled).
	Tools      *intent.Toolset
	Classifier *intent.Classifier
	// MaxHops bounds model calls per job; MaxSearches web_search calls per job;
	// MaxFetches web_fetch calls per job (0: web_fetch is not offered).
	MaxHops     int
	MaxSearches int
	MaxFetches  int
	// ModelTimeout bounds one model call.
	ModelTimeout time.Duration
	// LeaseTTL is how long a dead worker's claim on a hop blocks the next one; a live
	// worker renews its claim. It should match the consumers' AckWait.
	LeaseTTL time.Duration
	// StickyTTL is how long a conversation that ended in client tool calls keeps its
	// web_search chain sticky for the client's next request.
	StickyTTL time.Duration
	// Ender ends jobs (jobs.Ender): every ending of the chat worker goes through it.
	Ender   Ender
	Metrics *metrics.Metrics
	Log     *slog.Logger
	// ID names this worker in leases.
	ID string
	// Records holds the recorded search results and pages (nil: no replay, no dedupe):
	// a replay job's searches and fetches, and a search or fetch repeated within a job
	// or batch, are answered from them (replay.go).
	Records Records
	// Ledger records what model turns cost and holds the request's max_cost_usd
	// (spend.go; nil: turns are not counted, no cap).
	Ledger Ledger
	// Budgets are the tenants' spend budgets a model turn is reserved against (nil: none).
	Budgets *state.Budgets
	// EvidenceKey keys the delimiters search results are wrapped in (evidence.go):
	// every chat worker of a fleet needs the same one (FLEET_EVIDENCE_SECRET) for
	// them to render a job's messages alike. Empty: a random key of this process.
	EvidenceKey []byte
	// Failpoint, if set, is called at named points between the writes of a step
	// ("chat.after_model_call", "chat.after_turn_stored", "chat.after_dispatch"): the
	// crash tests pass ExitAt to kill a worker exactly there. Nil in production.
	Failpoint func(name string)

	// offered holds the server tools' tools[] entries, decoded once (tools.go).
	offered toolCache
}

// HandleJob runs the first hop of a new job.
func (w *Worker) HandleJob(ctx context.Context, d *bus.Delivery[bus.ChatJob]) error {
	return w.load(ctx, d.Msg.JobID, 0, d.Last(), d.Later)
}

// later is a delivery's Later: a step that makes its model call with its ModelCaller.Start
// takes it and ends when the answer is in, holding no goroutine while the provider
// thinks. nil: the step ends when its handler returns.
type later func() (finish func(error))

// load reads a job with its chain, claiming hop h's lease on the way, and advances it.
func (w *Worker) load(ctx context.Context, jobID string, h int, last bool, l later) error {
	st, err := w.Store.LoadStep(ctx, jobID, &state.Claim{Hop: h, Owner: w.ID, TTL: w.LeaseTTL})
	if errors.Is(err, state.ErrNotFound) {
		return jobs.Orphan(w.Metrics, w.Log, bus.ConsumerChat, jobID)
	}
	if err != nil {
		return err
	}
	return w.advance(ctx, st, h, last, nil, l)
}

// HandleResume records a finished search; the result that completes its hop runs the
// next hop. Recording, reading the chain and claiming the next hop take one round trip.
func (w *Worker) HandleResume(ctx context.Context, d *bus.Delivery[search.Done]) error {
	m := d.Msg
	// The result is stored as it arrived: it decoded, so it will again.
	st, err := w.Store.RecordAndLoad(ctx, m.JobID, m.Hop, m.CallID, d.Data, w.ID, w.LeaseTTL)
	if errors.Is(err, state.ErrNotFound) {
		return jobs.Orphan(w.Metrics, w.Log, bus.ConsumerResume, m.JobID)
	}
	if err != nil {
		return err
	}
	ev := bus.Event{JobID: m.JobID, Type: bus.EventSearchDone, At: time.Now().UTC(), Hop: m.Hop, CallID: m.CallID, Engine: m.Engine, Query: m.Result.Query, Sources: len(m.Result.Citation.Sources)}
	if m.Result.Citation.Error != nil {
		ev.Error = m.Result.Citation.Error.Type + ": " + m.Result.Citation.Error.Message
	}
	w.emit(ev)
	w.progress(searchDone(m.JobID, m.Hop, m.CallID, m.Engine, &m.Result))
	if st.Want >= 0 && st.Have < st.Want {
		// Another of the hop's results was stored last: its resume runs the next hop,
		// however many of them are in by now.
		return nil
	}
	return w.advance(ctx, st, m.Hop+1, d.Last(), &m, d.Later)
}

// emit publishes a progress event without waiting for the stream's acknowledgement.
func (w *Worker) emit(ev bus.Event) {
	if err := w.Bus.Emit(ev.Subject(), ev); err != nil {
		w.Log.Warn("chat: publishing event", "job", ev.JobID, "type", ev.Type, "err", err)
	}
}

func (w *Worker) failpoint(name string) {
	if w.Failpoint != nil {
		w.Failpoint(name)
	}
}

// advance runs hop h of a job, as far as it can go without waiting: it reads the
// hop's facts, asks next what to do, and does it. st is the job and chain as read with
// hop h's lease claimed. last is set on the message's final delivery: failures then
// end the job instead of retrying. known is the result the message being handled
// carries, already decoded. With l set, a model call is made with the model's
// ModelCaller.Start and the step ends when the answer is in (see later).
func (w *Worker) advance(ctx context.Context, st *state.Step, h int, last bool, known *search.Done, l later) error {
	return w.run(ctx, st, nil, h, last, known, false, l)
}

// run is advance's loop, from a decoded view v (nil: not yet) and whether hop h's
// model was called: an async model call's answer resumes it there.
func (w *Worker) run(ctx context.Context, st *state.Step, v *view, h int, last bool, known *search.Done, called bool, l later) error {
	job := st.Job
	var verr error
	for ; ; called = true {
		a := next(w.facts(st, v, verr, h))
		if v == nil && verr == nil && a.phase >= phaseBroken {
			// Only now is the chain decoded: the phases before need nothing of it, so a
			// result that does not complete its hop costs no decoding.
			if v, verr = newView(job, st.Chain); v != nil {
				v.evidenceKey = w.EvidenceKey
				if known != nil {
					v.seed(known)
				}
			}
			a = next(w.facts(st, v, verr, h))
		}
		if v != nil && v.unsaved != nil && a.act != actDispatch && a.act != actComplete {
			// The answer kept for its dispatch goes another way: stored now.
			if err := w.storeTurn(ctx, v, v.unsaved.hop, v.unsaved.b); err != nil {
				return err
			}
			continue
		}
		switch a.act {
		case actWait:
			return nil
		case actRetry:
			return bus.LeaseHeld(a.after, fmt.Errorf("hop %d of %s is being run by another worker", h, job.ID))
		case actReject:
			// The hop's dispatch record is missing: only possible if state expired.
			return bus.Permanent(fmt.Errorf("job %s hop %d: result for a hop that was never dispatched", job.ID, h-1))
		case actFail:
			return w.fail(ctx, job.ID, a.err)
		case actComplete:
			err := w.complete(ctx, v, h)
			if u := v.unsaved; err != nil && u != nil {
				// The completion failed before its ending was written: the answer,
				// paid for, is stored all the same, so the retry does not call the
				// model again.
				if serr := w.storeTurn(ctx, v, u.hop, u.b); serr != nil {
					w.Log.Warn("chat: storing a model answer", "job", job.ID, "hop", u.hop, "err", serr)
				}
			}
			return err
		case actDispatch:
			if err := w.dispatch(ctx, v, h); !errors.Is(err, errAnswerStood) {
				return err
			}
		case actCallModel:
			if called {
				return fmt.Errorf("hop %d of %s: the stored answer was not found", h, job.ID)
			}
			if l != nil {
				if finish := l(); finish != nil {
					w.deferModel(ctx, st, v, h, last, known, w.Models[job.Model].Client, finish)
					return nil
				}
			}
			if stored, err := w.callModel(ctx, v, h, last); err != nil || !stored {
				return err
			}
		}
	}
}

// facts reads what decides hop h's next action from a step and its decoded view: nil
// when not decoded yet (the answer is then not looked at), or nil with verr when the
// stored request is unreadable.
func (w *Worker) facts(st *state.Step, v *view, verr error, h int) facts {
	job := st.Job
	f := facts{hop: h, status: job.Status, badRequest: verr, claimed: st.Claimed, left: st.Left, model: job.Model, prevWant: -1}
	f.overdue = !job.Deadline.IsZero() && time.Now().After(job.Deadline)
	_, f.modelKnown = w.Models[job.Model]
	if hp, ok := st.Chain.Hops[h-1]; ok && h > 0 {
		f.prevWant, f.prevHave = hp.Expected, len(hp.Results)
	}
	if v == nil {
		return f
	}
	if hp, ok := v.chain.Hops[h]; ok && hp.Turn != nil {
		f.answered = true
		t, ok := v.turn(h)
		if f.garbled = !ok || t.parseErr != nil; !f.garbled {
			server, client := splitCalls(t, v.toolNames)
			f.server, f.client = len(server), len(client)
		}
	}
	return f
}

// offer decides whether hop h offers web_search, and with which engine narrowing.
func (w *Worker) offer(ctx context.Context, v *view, h int) (offered, googlePreferred bool, err error) {
	if w.Tools == nil || h >= w.MaxHops-1 {
		return false, false, nil // the last hop must answer
	}
	if slices.Contains(v.toolNames, intent.ToolName) {
		return false, false, nil // the client's own web_search tool wins
	}
	if h == 0 {
		r := w.Classifier.Classify(wire.LatestUserText(v.req.Messages))
		// A request that declared search (web_search_options, a web_search tool of any
		// protocol) is offered the tool whatever the intent rules say.
		sticky := r.WebSearch || v.req.Search != nil && v.req.Search.Requested
		if !sticky {
			if hash, ok := continuedConversation(v.job.Tenant, v.req.Messages); ok {
				sticky, err = w.Store.StickyConversation(ctx, hash)
				if err != nil {
					return false, false, err
				}
			}
		}
		// The flags are stored with the hop's answer (SaveTurn).
		v.chain.Sticky, v.chain.GooglePreferred = sticky, r.GooglePreferred
	}
	return w.Tools.ShouldInject(intent.Result{}, v.chain.Sticky), v.chain.GooglePreferred, nil
}

// callModel calls the main model for hop h, whose lease the caller holds (it is kept
// alive during the call), and stores the answer in the store and in v. It reports
// whether an answer is stored; false with a nil error means the job ended.
func (w *Worker) callModel(ctx context.Context, v *view, h int, last bool) (stored bool, err error) {
	// blocking's Start calls done before it returns: so does startModel.
	w.startModel(ctx, v, h, last, blocking{w.Models[v.job.Model].Client}, nil, func(s bool, e error) { stored, err = s, e })
	return stored, err
}

// ModelCaller calls a main model in its provider's protocol (*upstream.Caller): a
// hop's canonical request is translated once (Prepare), then sent, its answer coming
// back as the turn the chain keeps. Start returns once the request is out and calls
// done when the answer is in; Complete waits for it.
type ModelCaller interface {
	Prepare(req *wire.Request, stream bool) (*upstream.Call, error)
	Complete(ctx context.Context, p *upstream.Call, onDelta func(llm.Delta)) (*wire.Turn, error)
	Start(ctx context.Context, p *upstream.Call, onDelta func(llm.Delta), done func(*wire.Turn, error))
}

var _ ModelCaller = (*upstream.Caller)(nil)

// blocking makes a model's call with Complete, on the calling goroutine.
type blocking struct{ ModelCaller }

func (b blocking) Start(ctx context.Context, p *upstream.Call, onDelta func(llm.Delta), done func(*wire.Turn, error)) {
	done(b.Complete(ctx, p, onDelta))
}

// deferModel makes hop h's model call with the model caller's Start and returns: the
// rest of the step runs when the answer is in, on the goroutine that read it, and
// finish (the delivery's Later) ends the step. A hop completed on the way (searches
// answered from the records) calls its model there, synchronously.
func (w *Worker) deferModel(ctx context.Context, st *state.Step, v *view, h int, last bool, known *search.Done, s ModelCaller, finish func(error)) {
	g := w.guard(st.Job.ID, finish)
	w.startModel(ctx, v, h, last, s, g, func(stored bool, err error) {
		defer w.recoverInto(st.Job.ID, g.end)
		if err == nil && stored {
			err = w.run(ctx, st, v, h, last, known, true, nil)
		}
		g.end(err)
	})
}

// startModel makes hop h's model call with s: it returns once the request is out
// (with a blocking s, once the call has ended), and done gets what callModel returns
// when the answer is in (or at once, when the call ended before it went out). g, if set, is told the answer
// is in before it is stored; if the step was given up on meanwhile, the answer is
// stored all the same (it is paid for), but done is not called.
func (w *Worker) startModel(ctx context.Context, v *view, h int, last bool, s ModelCaller, g *stepGuard, done func(stored bool, err error)) {
	mc, err := w.prepareCall(ctx, v, h, last)
	if mc == nil {
		done(false, err)
		return
	}
	// A step given up on frees its hop at once for the retry.
	g.onFire(func() { mc.release(true) })
	mctx, cancel := context.WithTimeout(ctx, w.ModelTimeout)
	s.Start(mctx, mc.call, mc.onDelta, func(t *wire.Turn, err error) {
		cancel()
		live := g.arrived()
		stored, err := w.answered(ctx, v, h, last, mc, t, err, live)
		if live {
			done(stored, err)
		}
	})
}

// stepGuard ends a deferred step whose model call's answer never comes back (a lost
// callback, a panic on the transport's goroutine): past the model's timeout and a
// lease's length it frees the hop and ends the step with an error, so the step is
// retried rather than held by its heartbeats, and its hop by lease renewals, for
// ever.
type stepGuard struct {
	once   sync.Once
	mu     sync.Mutex
	timer  *time.Timer
	fired  bool
	finish func(error)
	fire   func() // what else firing does (frees the hop)
}

func (w *Worker) guard(jobID string, finish func(error)) *stepGuard {
	g := &stepGuard{finish: finish}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.timer = time.AfterFunc(max(w.ModelTimeout, time.Second)+w.LeaseTTL, func() {
		g.mu.Lock()
		g.fired = true
		fire := g.fire
		g.mu.Unlock()
		if fire != nil {
			fire()
		}
		w.Log.Error("chat: a model call's answer never came back; the step is retried", "job", jobID)
		g.end(errors.New("the model call's answer never came back"))
	})
	return g
}

// onFire sets what else firing does (nothing without a guard).
func (g *stepGuard) onFire(f func()) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.fire = f
}

// arrived stops the guard as the answer comes in; false: it had already fired.
func (g *stepGuard) arrived() bool {
	if g == nil {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.timer.Stop()
	return !g.fired
}

// end ends the step once.
func (g *stepGuard) end(err error) {
	g.once.Do(func() {
		g.mu.Lock()
		g.timer.Stop()
		g.mu.Unlock()
		g.finish(err)
	})
}

// recoverInto ends a step whose continuation panicked, as the consumer does for a
// handler that panics (the continuation runs on the transport's goroutine, outside
// the consumer's recover).
func (w *Worker) recoverInto(jobID string, finish func(error)) {
	if p := recover(); p != nil {
		w.Log.Error("chat: the step after a model call panicked", "job", jobID, "panic", p, "stack", string(debug.Stack()))
		finish(fmt.Errorf("panicked: %v", p))
	}
}

// modelCall is hop h's model call between its request and its answer.
type modelCall struct {
	model   Model
	call    *upstream.Call
	onDelta func(llm.Delta)
	// offered and fetchOffered say which server tools the hop offered, gp whether
	// Google-backed engines were preferred: the turn records them.
	offered, gp, fetchOffered bool
	// release ends the hop's lease renewal (drop: free the hop at once).
	release func(drop bool)
	start   time.Time
}

// prepareCall does what comes before hop h's model call: it keeps the hop's lease
// alive, decides the tools offered and builds the request. A nil call means the step
// ends with err (nil: the job ended).
func (w *Worker) prepareCall(ctx context.Context, v *view, h int, last bool) (mc *modelCall, err error) {
	mc = &modelCall{model: w.Models[v.job.Model]}
	mc.release = w.Store.KeepHop(v.job.ID, h, w.ID, w.LeaseTTL)
	fail := func(err error) (*modelCall, error) {
		mc.release(err != nil)
		return nil, err
	}
	offered, gp, err := w.offer(ctx, v, h)
	if err != nil {
		return fail(err)
	}
	fetchOffered := w.offerFetch(v, h)
	if spent, err := w.openRequestLedger(ctx, v, h); err != nil {
		return fail(err)
	} else if spent {
		offered, fetchOffered = false, false // the request's max_cost_usd is spent: the model answers now
	}
	req, srcs, err := w.modelRequest(v, h, offered, fetchOffered, gp, mc.model)
	if err != nil {
		return fail(w.fail(ctx, v.job.ID, &state.JobError{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: err.Error()}))
	}
	mc.onDelta = w.relay(v, h, len(srcs.list), mc.model.NativeSearch && offered)
	if mc.call, err = mc.model.Client.Prepare(req, mc.onDelta != nil); err != nil {
		return fail(w.modelFailed(ctx, v.job.ID, string(v.protocol), mc.model, err, last))
	}
	if ok, err := w.reserveTurn(ctx, v, h, mc.call.Size(), offered && mc.model.NativeSearch); !ok {
		return fail(err) // the turn's worst case does not fit a budget: the job failed (spend.go)
	}
	w.emit(bus.Event{JobID: v.job.ID, Type: bus.EventModelCall, At: time.Now().UTC(), Hop: h})
	if v.req.Stream && len(srcs.list) > 0 {
		// The ingress turns the hop's [n] markers into citations as they stream.
		m := bus.StreamMsg{JobID: v.job.ID, Type: bus.StreamSources, Hop: h}
		for _, s := range srcs.list {
			m.Sources = append(m.Sources, bus.StreamSource{URL: s.Web.URI, Title: s.Web.Title})
		}
		w.progress(m)
	}
	mc.offered, mc.gp, mc.fetchOffered = offered, gp, fetchOffered
	mc.start = time.Now()
	return mc, nil
}

// modelRequest is hop h's model request in canonical form: the client's request with
// the chain's history after its messages, the evidence policy in its system prompt
// once the hop offers a server tool or reads results, and the server tools offered.
// It shares the stored request's slices: it is read, never written.
func (w *Worker) modelRequest(v *view, h int, offered, fetchOffered, gp bool, model Model) (*wire.Request, *sources, error) {
	base := v.req
	hist, srcs := v.history(h)
	req := hopRequest(base, h, offered)
	req.Model = model.Upstream
	req.Messages = append(base.Messages[:len(base.Messages):len(base.Messages)], hist...)
	if offered || fetchOffered || v.hasResults(h) {
		req.System = withPolicy(base.System)
	}
	req.Tools = base.Tools[:len(base.Tools):len(base.Tools)] // the server tools are appended to a copy
	for _, name := range []string{intent.ToolName, intent.FetchToolName} {
		if name == intent.ToolName && !offered || name == intent.FetchToolName && !fetchOffered {
			continue
		}
		t, err := w.offered.tool(serverTools[name].schema(w, gp))
		if err != nil {
			return nil, nil, fmt.Errorf("the %s tool's schema: %w", name, err)
		}
		req.Tools = append(req.Tools, t)
	}
	return req, srcs, nil
}

// answered ends hop h's model call: it stores the answer (first write wins) in the
// store and in v, or handles the failure, and releases the hop's lease. It reports
// what callModel does. When the step goes on (live), the answer is kept in v alone:
// the dispatch stores it with its calls, the completion with the job's ending, each
// in one write (storeTurn stores it for any other next action).
func (w *Worker) answered(ctx context.Context, v *view, h int, last bool, mc *modelCall, answer *wire.Turn, err error, live bool) (stored bool, _ error) {
	model := mc.model
	// A step that ends in an error is retried: free the hop for that delivery at once.
	defer func() { mc.release(err != nil) }()
	if w.Metrics != nil {
		w.Metrics.ModelSeconds.WithLabelValues(model.Provider).Observe(time.Since(mc.start).Seconds())
	}
	if err != nil {
		err = w.modelFailed(ctx, v.job.ID, string(v.protocol), model, err, last)
		return false, err
	}
	if w.Metrics != nil {
		w.Metrics.ModelCalls.WithLabelValues(model.Provider, "ok").Inc()
	}
	w.failpoint("chat.after_model_call")
	t := &turn{Turn: *answer, Offered: mc.offered, GooglePreferred: mc.gp, Fetch: mc.fetchOffered}
	b, _ := json.Marshal(t)
	if live {
		v.chain.Hop(h).Turn, v.unsaved = b, &unsavedTurn{hop: h, b: b}
		return true, nil
	}
	if err = w.storeTurn(ctx, v, h, b); err != nil {
		return false, err // the deferred release frees the hop for the retry
	}
	return true, nil
}

// storeTurn stores hop h's answer b (first write wins) and puts the stored answer in
// v; it prices the answer into the spend ledgers when it is b.
func (w *Worker) storeTurn(ctx context.Context, v *view, h int, b []byte) error {
	v.unsaved = nil
	// The answer is paid for: storing it is worth riding out a Redis restart (while
	// this worker keeps the hop's lease), or the redelivery would call the model again.
	var got json.RawMessage
	err := state.Persist(ctx, min(w.LeaseTTL/2, 15*time.Second), func() (err error) {
		got, err = w.Store.SaveTurn(ctx, v.job.ID, h, b, v.chain.Sticky, v.chain.GooglePreferred)
		return err
	})
	if err != nil {
		return err
	}
	w.turnStored(ctx, v, h, b, got)
	return nil
}

// turnStored puts got, hop h's stored answer, in v, b being the answer this worker
// got: another worker's answer, if it stored first, replaces it. Its own is priced
// into the spend ledgers now (once per hop; a crash before this leaves it to the
// completion's sweep, spend.go).
func (w *Worker) turnStored(ctx context.Context, v *view, h int, b, got []byte) {
	v.chain.Hop(h).Turn = got
	if !bytes.Equal(got, b) {
		delete(v.turns, h) // decoded from b, if at all
	}
	w.failpoint("chat.after_turn_stored")
	if bytes.Equal(got, b) {
		w.recordTurn(ctx, v, h)
	}
}

// relay returns the delta callback of hop h's model call: nil (the model answers
// whole) unless the job's client streams; then each piece of text goes out on the
// job's live stream at once, placed by its character offset in the hop's text and
// tagged with this attempt, so the ingress can drop what a re-run hop repeats.
// Publishing is fire and forget: a lost delta is made good by the stored answer.
//
// A hop whose model may run its provider's own search (native) is not relayed: its
// [n] markers are placed where the provider's citations point once the whole answer
// is known (Gemini's grounding comes with the last chunk, Responses' annotations
// after the text they cite), so text streamed as written would not be a prefix of
// the stored answer, and the client's stream would end garbled. The stored answer
// streams to the client when the hop ends.
func (w *Worker) relay(v *view, h int, sources int, native bool) func(llm.Delta) {
	if !v.req.Stream || native {
		return nil
	}
	attempt := w.ID + "." + strconv.FormatInt(time.Now().UnixNano(), 36)
	offset := 0
	subject := bus.SubjectStream(v.job.ID)
	// The text is relayed as the stored answer will be: a marker that cites no source
	// is dropped here too (a marker still being written is held until it is whole; the
	// answer's end fills in what a cut stream held).
	cites := newMarkerFilter(sources)
	return func(d llm.Delta) {
		text := cites.Push(d.Text)
		if text == "" {
			return
		}
		m := bus.StreamMsg{JobID: v.job.ID, Type: bus.StreamDelta, Hop: h, Attempt: attempt, Offset: offset, Text: text}
		offset = m.End()
		if err := w.Bus.Emit(subject, m); err != nil {
			w.Log.Debug("chat: publishing a delta", "job", v.job.ID, "err", err)
		}
	}
}

// progress publishes a search's progress on the job's live stream (fire and forget;
// a job nobody streams has no subscriber, and the message goes nowhere).
func (w *Worker) progress(m bus.StreamMsg) {
	if err := w.Bus.Emit(bus.SubjectStream(m.JobID), m); err != nil {
		w.Log.Debug("chat: publishing search progress", "job", m.JobID, "err", err)
	}
}

// modelFailed retries a model call that may succeed later, or ends the job with the
// failure on the last delivery or when a retry cannot help.
func (w *Worker) modelFailed(ctx context.Context, jobID, protocol string, model Model, err error, last bool) error {
	if errors.Is(err, context.Canceled) {
		return err // shutting down: another worker takes the step
	}
	var le *llm.Error
	retryable := errors.Is(err, context.DeadlineExceeded)
	after := bus.Backoff(1)
	if errors.As(err, &le) {
		retryable = le.Retryable()
		if le.RetryAfter > 0 {
			after = le.RetryAfter
		}
	}
	if w.Metrics != nil {
		w.Metrics.ModelCalls.WithLabelValues(model.Provider, "error").Inc()
	}
	return bus.RetryOrEnd(err, retryable, last, after, func() error {
		// The details (addresses, the transport's words) go to the log; the client
		// gets a stable message.
		w.Log.Warn("chat: model call failed", "job", jobID, "provider", model.Provider, "err", err)
		return w.fail(ctx, jobID, modelError(err, le, protocol))
	})
}

// modelError is how a failed model call is reported to the client in protocol: never
// with the provider's address or the transport's error text, and a provider's refusal
// only when it is about what the client sent (llm.ClientRefused), in the client's
// field names; a refusal of the request the fleet built is the fleet's failure.
func modelError(err error, le *llm.Error, protocol string) *state.JobError {
	if r, ok := llm.ClientRefused(le, protocol); ok {
		return jobs.ProviderRefused(r.Status, r.Code, r.Message)
	}
	switch {
	case le != nil && le.Status >= 400 && le.Status < 500 && le.Status != http.StatusTooManyRequests && le.Status != http.StatusRequestTimeout:
		return jobs.UpstreamFailed("the model's provider refused the request the fleet made for it; the fleet has logged the details")
	case errors.Is(err, context.DeadlineExceeded):
		return jobs.ModelTimeout()
	case le != nil:
		return jobs.UpstreamFailed(fmt.Sprintf("the model's provider failed (HTTP %d)", le.Status))
	}
	return jobs.UpstreamFailed("the model's provider could not be reached")
}

// plan turns hop h's server-tool calls into calls to publish, each through its tool
// in the registry (tools.go): validated arguments (for web_search, a chosen engine),
// or a local error result the model reads (rejected arguments, the per-job search or
// fetch limit). A plan already stored (a replayed dispatch) is reused as is. searches
// counts the web_search calls to run (fetches are counted from the stored calls).
func (w *Worker) plan(v *view, h int, t *turn, server []wire.ToolCall) (calls []call, searches int, stored bool) {
	if cs := v.calls(h); cs != nil {
		for _, c := range cs {
			if !c.Local && c.Tool == "" {
				searches++
			}
		}
		return cs, searches, true
	}
	p := planState{searchLimit: w.MaxSearches, fetchLimit: w.fetchLimit(v)}
	if opts := v.req.Search; opts != nil && opts.MaxUses > 0 && opts.MaxUses < p.searchLimit {
		p.searchLimit = opts.MaxUses // the request's max_uses narrows the fleet's limit, never raises it
	}
	p.searchBudget = p.searchLimit - v.chain.Searches
	p.fetchBudget = p.fetchLimit - v.fetches(h)
	for _, tc := range server {
		c := call{ID: tc.ID}
		serverTools[tc.Name].plan(w, v, t, tc, &p, &c)
		calls = append(calls, c)
	}
	return calls, p.searches, false
}

// withRequestOptions applies the request's own search settings (domains, hits per
// search, country) to a query the model wrote; the model's own filters stay where the
// request sets none.
func withRequestOptions(q engines.Query, o *llm.SearchOptions) engines.Query {
	if o == nil {
		return q
	}
	if len(o.AllowedDomains) > 0 {
		q.AllowedDomains = o.AllowedDomains
	}
	if len(o.BlockedDomains) > 0 {
		q.BlockedDomains = o.BlockedDomains
	}
	if o.Count > 0 {
		q.Count = o.Count
	}
	if o.Country != "" {
		q.Country = o.Country
	}
	return q
}

// dispatch records hop h's calls and publishes its searches. A replayed dispatch
// publishes the same searches again: the streams drop them as duplicates (same
// message ids), and past the duplicate window the search worker answers from its
// stored result. Nothing is searched twice.
func (w *Worker) dispatch(ctx context.Context, v *view, h int) error {
	jobID := v.job.ID
	t, _ := v.turn(h)
	server, _ := splitCalls(t, v.toolNames)
	calls, searches, stored := w.plan(v, h, t, server)
	cb := v.chain.Hop(h).Calls
	if !stored {
		var err error
		if calls, searches, err = w.fromRecord(ctx, v, h, calls, searches); err != nil {
			return err
		}
		if len(calls) > 0 {
			calls[0].Salt = newSalt() // kept only if this recording is the first (SaveCalls)
		}
		cb, _ = json.Marshal(calls)
	}
	// Recording the calls (once) also reads the job's status: a cancel that arrived
	// while the model was thinking stops the paid searches. An answer not stored yet
	// (answered) is stored with them.
	var status state.Status
	if u := v.unsaved; u != nil && u.hop == h {
		var got json.RawMessage
		err := state.Persist(ctx, min(w.LeaseTTL/2, 15*time.Second), func() (err error) {
			status, got, err = w.Store.SaveTurnAndCalls(ctx, jobID, h, u.b, v.chain.Sticky, v.chain.GooglePreferred, cb, len(calls), searches)
			return err
		})
		if err != nil {
			return err
		}
		v.unsaved = nil
		w.turnStored(ctx, v, h, u.b, got)
		if !bytes.Equal(got, u.b) {
			return errAnswerStood
		}
	} else {
		var err error
		if status, err = w.Store.SaveCalls(ctx, jobID, h, cb, len(calls), searches); err != nil {
			return err
		}
	}
	if status == "" {
		return jobs.Orphan(w.Metrics, w.Log, bus.ConsumerChat, jobID) // Redis lost the job meanwhile: no paid search
	}
	if status.Terminal() {
		return nil
	}
	var pending []bus.Pending
	now := time.Now().UTC()
	complete := false
	for _, c := range calls {
		query := c.Query.Query
		if c.Local {
			m, err := bus.Encode(bus.SubjectResume, search.Done{JobID: jobID, Hop: h, CallID: c.ID, Engine: c.Engine, Result: *c.Result, Page: c.Page})
			if err != nil {
				return bus.Permanent(err)
			}
			have, want, err := w.Store.RecordResult(ctx, jobID, h, c.ID, m.Data)
			if err != nil {
				return err
			}
			complete = have == want
			w.progress(bus.StreamMsg{JobID: jobID, Type: bus.StreamSearchStarted, Hop: h, CallID: c.ID, Engine: c.Engine, Query: query, Tool: c.Tool})
			w.progress(searchDone(jobID, h, c.ID, c.Engine, c.Result))
			continue
		}
		subject, req := toolOf(c).request(v, h, t, c)
		w.emit(bus.Event{JobID: jobID, Type: bus.EventSearchRequested, At: now, Hop: h, CallID: c.ID, Engine: c.Engine, Query: query})
		w.progress(bus.StreamMsg{JobID: jobID, Type: bus.StreamSearchStarted, Hop: h, CallID: c.ID, Engine: c.Engine, Query: query, Tool: c.Tool})
		ps, err := w.Bus.PublishAsync(subject, req)
		if err != nil {
			return err
		}
		pending = append(pending, ps)
	}
	if err := bus.Wait(ctx, pending...); err != nil {
		return err
	}
	w.failpoint("chat.after_dispatch")
	if complete {
		// The last call answered here (locally, or from a record) completed the hop:
		// its searches, if any, came back during the dispatch. The model goes on now.
		return w.load(ctx, jobID, h+1, false, nil)
	}
	return nil
}

// errAnswerStood is dispatch's word that another worker's answer to the hop was
// stored before this worker's (whose calls were planned from it, and not recorded):
// the step goes on from the stored answer.
var errAnswerStood = errors.New("another answer to the hop was stored first")

// searchDone is the live-stream message of a finished search: its pages (URL and
// title, in the engine's order) or its error.
func searchDone(jobID string, h int, callID, engine string, res *engines.Result) bus.StreamMsg {
	m := bus.StreamMsg{JobID: jobID, Type: bus.StreamSearchDone, Hop: h, CallID: callID, Engine: engine, Query: res.Query}
	if engine == search.FetchEngine {
		m.Tool = intent.FetchToolName
	}
	if e := res.Citation.Error; e != nil {
		m.Error = e.Type + ": " + e.Message
		return m
	}
	for _, s := range traceSources(res) { // titled and dated as the stored trace is
		m.Sources = append(m.Sources, bus.StreamSource{URL: s.URL, Title: s.Title, PageAge: s.PageAge})
	}
	return m
}

// complete ends the job with hop h's answer.
func (w *Worker) complete(ctx context.Context, v *view, h int) error {
	t, _ := v.turn(h)
	srcs := nativeSources(t, v.allSources(h))
	trace, searchUsage := v.trace(h)
	trace, searchUsage = v.addNative(h, trace, searchUsage)
	resp, shown := buildResponse(v, h, t, srcs, searchUsage.Searches)
	cites := resp.Chain.Citations
	usage := chainUsage(v, h)
	spend := w.jobSpend(ctx, v, h, searchUsage.Searches, searchUsage.CostUSD)
	resp.Usage.Spend = (*wire.Spend)(&spend)
	answer, err := wire.EncodeAnswer(resp)
	if err != nil {
		return bus.Permanent(err)
	}
	ub, _ := json.Marshal(jobUsage{PromptTokens: usage.PromptTokens, CompletionTokens: usage.CompletionTokens, TotalTokens: usage.TotalTokens,
		ModelCalls: h + 1, ModelProtocol: w.Models[v.job.Model].Protocol, Searches: searchUsage.Searches, SearchCostUSD: searchUsage.CostUSD,
		ModelCostUSD: spend.ModelCostUSD, CostUSD: spend.CostUSD, Citations: cites})
	if w.Metrics != nil {
		w.Metrics.Citations.WithLabelValues("valid").Add(float64(cites.Valid))
		w.Metrics.Citations.WithLabelValues("removed").Add(float64(cites.Removed))
	}
	tb, _ := json.Marshal(trace)
	if resp.Stop == wire.StopToolUse && v.chain.Sticky {
		// The client runs its tools and comes back with this conversation plus their
		// results: that request continues this chain, so it keeps web_search. Marked
		// before the job ends: the client may send that request as soon as it has the
		// answer.
		if hash, ok := conversationHash(v.job.Tenant, append(v.req.Messages[:len(v.req.Messages):len(v.req.Messages)], shown)); ok {
			if err := w.Store.MarkStickyConversation(ctx, hash, w.StickyTTL); err != nil {
				return err
			}
		}
	}
	// The request as read is handed to the job's waiting ingress with the ending.
	end := jobs.Ending{Status: state.Completed, Hop: h, Response: answer, Usage: ub, Trace: tb, Request: v.job.Request}
	u := v.unsaved
	if u == nil || u.hop != h {
		return w.end(ctx, v.job.ID, end)
	}
	// The answer (answered) is stored with the ending, in one write. It is paid for:
	// the ending rides out a Redis restart as storeTurn does.
	end.Turn, v.unsaved = u.b, nil
	return state.Persist(ctx, min(w.LeaseTTL/2, 15*time.Second), func() error {
		err := w.end(ctx, v.job.ID, end)
		if errors.Is(err, state.ErrAnswerStood) || errors.Is(err, jobs.ErrUnknownJob) {
			// Another worker's answer stands (the step is retried from it), or the job
			// is gone: trying again cannot help.
			return backoff.Permanent(err)
		}
		return err
	})
}

// jobUsage is a completed job's usage record (the job's "usage" field): its fields in
// name order, the order the map it was encoded from before wrote them in, so the
// record's bytes are as they were.
type jobUsage struct {
	Citations        wire.CitationCounts `json:"citations"`
	CompletionTokens int                 `json:"completion_tokens"`
	CostUSD          float64             `json:"cost_usd"`
	ModelCalls       int                 `json:"model_calls"`
	ModelCostUSD     float64             `json:"model_cost_usd"`
	ModelProtocol    string              `json:"model_protocol"`
	PromptTokens     int                 `json:"prompt_tokens"`
	SearchCostUSD    float64             `json:"search_cost_usd"`
	Searches         int                 `json:"searches"`
	TotalTokens      int                 `json:"total_tokens"`
}

// fail ends a job with an error, visibly: status failed, a "failed" event.
func (w *Worker) fail(ctx context.Context, jobID string, je *state.JobError) error {
	return w.end(ctx, jobID, jobs.Ending{Status: state.Failed, Error: je})
}

// end is where every job the chat worker ends is ended: jobs.End (the terminal
// status, never over another, then the terminal event; the finish hooks run from that
// event). A replayed step that ends the job again only republishes its event.
func (w *Worker) end(ctx context.Context, jobID string, o jobs.Ending) error {
	if o.Error != nil {
		w.Log.Info("chat: job failed", "job", jobID, "type", o.Error.Type, "err", o.Error.Message)
	}
	return w.Ender.End(ctx, jobID, o)
}

// FailJob ends a job from outside a step (the reaper, dead letters).
func (w *Worker) FailJob(ctx context.Context, jobID string, je *state.JobError) error {
	if err := w.fail(ctx, jobID, je); err != nil && !errors.Is(err, jobs.ErrUnknownJob) {
		return err
	}
	return nil // a job Redis does not know has nothing to fail (counted as an orphan)
}

func chainUsage(v *view, last int) llm.Usage {
	var u llm.Usage
	for h := 0; h <= last; h++ {
		if t, ok := v.turn(h); ok {
			u.Add(t.Usage)
		}
	}
	return u
}

// conversationHash identifies a tenant's conversation by its messages' roles, text
// and tool call ids (not their form: one assistant turn reads as one message whether a
// protocol splits it or not, and reasoning does not count). The tenant is part of it:
// one tenant's conversation never makes another's sticky.
func conversationHash(tenant string, msgs []wire.Message) (string, bool) {
	if len(msgs) == 0 {
		return "", false
	}
	h := sha256.New()
	h.Write([]byte(tenant))
	h.Write([]byte{3})
	for i, m := range msgs {
		if i > 0 && m.Role != msgs[i-1].Role {
			h.Write([]byte{1})
		}
		if i == 0 || m.Role != msgs[i-1].Role {
			h.Write([]byte(m.Role))
			h.Write([]byte{0})
		}
		for _, p := range m.Parts {
			switch p.Kind {
			case wire.PartText:
				h.Write([]byte(p.Text))
			case wire.PartToolCall:
				h.Write([]byte{0})
				h.Write([]byte(p.Call.ID))
				h.Write([]byte{0})
			case wire.PartToolResult:
				h.Write([]byte{0})
				h.Write([]byte(p.Result.CallID))
				h.Write([]byte{0})
				for _, rp := range p.Result.Parts {
					h.Write([]byte(rp.Text))
				}
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:16]), true
}

// continuedConversation returns the hash of a request's conversation up to its last
// assistant message: the key under which an earlier answer marked the chain sticky.
func continuedConversation(tenant string, msgs []wire.Message) (string, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == wire.RoleAssistant {
			return conversationHash(tenant, msgs[:i+1])
		}
	}
	return "", false
}
