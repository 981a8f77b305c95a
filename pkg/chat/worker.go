// Package chat is the chat worker: it runs each job's chain — intent, tool injection,
// the main-model call, server-tool dispatch, resume, the final answer — as a state
// machine whose state lives in a ChainStore (Redis: pkg/state), so any worker can take
// any step of any chain and a redelivered step finds its work already recorded.
//
// Each delivery runs one step (step.go): it reads a hop's stored view in one round
// trip, and next (phase.go), a pure function, says what to do: call the model, dispatch
// searches, wait, complete or fail. Every ending goes through Worker.end. Per hop h of
// a job:
//
//  1. The step of hop h (model.go): if hop h's model answer is stored, use it; else
//     take the hop's lease, call the model and keep its answer, stored with what comes
//     next (first write wins). No paid call is repeated.
//  2. The answer has web_search calls (dispatch.go): validate each (a rejected call
//     gets an error result the model reads), record the calls with the answer,
//     publish one search per call (Nats-Msg-Id job:hop:call).
//  3. A search result arrives (resume.go): record it atomically; the result that
//     completes the hop's set runs the step of hop h+1.
//  4. The answer has no server calls (finish.go): store the response, mark the job
//     completed, publish "completed". Client tool calls end the job the same way: they
//     are the client's to run.
package chat

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/intent"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/spend"
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
	Pricing spend.Pricing
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
	Ender   *jobs.Ender
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
	Ledger spend.TurnLedger
	// Budgets are the tenants' spend budgets a model turn is reserved against (nil: none).
	Budgets *spend.Budgets
	// EvidenceKey keys the delimiters search results are wrapped in (evidence.go):
	// every chat worker of a fleet needs the same one (FLEET_EVIDENCE_SECRET) for
	// them to render a job's messages alike. Empty: a random key of this process.
	EvidenceKey []byte
	// Failpoint, if set, is called at named points between the writes of a step
	// ("chat.after_model_call", "chat.after_turn_stored", "chat.after_dispatch"): the
	// crash tests pass ExitAt to kill a worker exactly there. Nil in production.
	Failpoint func(name string)
}

// HandleJob runs the first hop of a new job.
func (w *Worker) HandleJob(ctx context.Context, d *bus.Delivery[bus.ChatJob]) error {
	return w.load(ctx, d.Msg.JobID, 0, d.Last())
}

// load reads a job with its chain, claiming hop h's lease on the way, and runs hop h's
// step. last is set on the message's final delivery.
func (w *Worker) load(ctx context.Context, jobID string, h int, last bool) error {
	st, err := w.Store.LoadStep(ctx, jobID, &state.Claim{Hop: h, Owner: w.ID, TTL: w.LeaseTTL})
	if errors.Is(err, state.ErrNotFound) {
		return jobs.Orphan(w.Metrics, w.Log, bus.ConsumerChat, jobID)
	}
	if err != nil {
		return err
	}
	return (&step{w: w, st: st, h: h, last: last}).run(ctx)
}

// emit publishes a progress event without waiting for the stream's acknowledgement.
func (w *Worker) emit(ev bus.Event) {
	if err := w.Bus.Emit(ev.Subject(), ev); err != nil {
		w.Log.Warn("chat: publishing event", "job", ev.JobID, "type", ev.Type, "err", err)
	}
}

// progress publishes a search's progress on the job's live stream (fire and forget;
// a job nobody streams has no subscriber, and the message goes nowhere).
func (w *Worker) progress(m bus.StreamMsg) {
	if err := w.Bus.Emit(bus.SubjectStream(m.JobID), m); err != nil {
		w.Log.Debug("chat: publishing search progress", "job", m.JobID, "err", err)
	}
}

func (w *Worker) failpoint(name string) {
	if w.Failpoint != nil {
		w.Failpoint(name)
	}
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
