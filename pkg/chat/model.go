package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/intent"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/state"
	"github.com/searchfleet/searchfleet/pkg/trace"
)

// ModelCaller calls a main model in its provider's protocol (*upstream.Caller): a
// hop's canonical request is translated once (Prepare), then sent, its answer coming
// back as the turn the chain keeps (Complete).
type ModelCaller interface {
	Prepare(req *wire.Request, stream bool) (*upstream.Call, error)
	Complete(ctx context.Context, p *upstream.Call, onDelta func(llm.Delta)) (*wire.Turn, error)
}

var _ ModelCaller = (*upstream.Caller)(nil)

// callModel calls the main model for the step's hop, whose lease the step holds (it is
// kept alive during the call), and keeps the answer in the view: the dispatch stores
// it with its calls, the completion with the job's ending, each in one write (run
// stores it for any other next action). It reports whether there is an answer; false
// with a nil error means the job ended.
func (s *step) callModel(ctx context.Context) (bool, error) {
	mc, err := s.prepare(ctx)
	if mc == nil {
		return false, err
	}
	mctx, span := trace.Model(ctx, mc.model.Protocol, mc.model.Provider, mc.model.Upstream)
	mctx, cancel := context.WithTimeout(mctx, s.w.ModelTimeout)
	t, err := mc.model.Client.Complete(mctx, mc.call, mc.onDelta)
	cancel()
	if t != nil && span.IsRecording() {
		span.SetAttributes(trace.JobID.String(s.v.job.ID), trace.Hop.Int(s.h))
		trace.Answered(span, t.Model, t.Usage.PromptTokens, t.Usage.CompletionTokens, string(t.Stop))
		trace.Messages(span, wire.LatestUserText(s.v.req.Messages), t.Text(), string(t.Stop))
	}
	trace.End(span, err)
	return s.answered(ctx, mc, t, err)
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

// prepare does what comes before the hop's model call: it keeps the hop's lease
// alive, decides the tools offered and builds the request. A nil call means the step
// ends with err (nil: the job ended).
func (s *step) prepare(ctx context.Context) (mc *modelCall, err error) {
	w, v, h := s.w, s.v, s.h
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
		return fail(s.modelFailed(ctx, mc.model, err))
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

// answered ends the hop's model call: it keeps the answer in the view (see callModel),
// or handles the failure, and releases the hop's lease.
func (s *step) answered(ctx context.Context, mc *modelCall, answer *wire.Turn, err error) (bool, error) {
	w, v, h := s.w, s.v, s.h
	model := mc.model
	// A step that ends in an error is retried: free the hop for that delivery at once.
	defer func() { mc.release(err != nil) }()
	if w.Metrics != nil {
		trace.Observe(ctx, w.Metrics.ModelSeconds.WithLabelValues(model.Provider), time.Since(mc.start).Seconds())
	}
	if err != nil {
		err = s.modelFailed(ctx, model, err)
		return false, err
	}
	if w.Metrics != nil {
		w.Metrics.ModelCalls.WithLabelValues(model.Provider, "ok").Inc()
	}
	w.failpoint("chat.after_model_call")
	t := &turn{Turn: *answer, Offered: mc.offered, GooglePreferred: mc.gp, Fetch: mc.fetchOffered}
	b, _ := json.Marshal(t)
	v.chain.Hop(h).Turn, v.unsaved = b, &unsavedTurn{hop: h, b: b}
	return true, nil
}

// modelFailed retries a model call that may succeed later, or ends the job with the
// failure on the last delivery or when a retry cannot help.
func (s *step) modelFailed(ctx context.Context, model Model, err error) error {
	w, jobID := s.w, s.v.job.ID
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
	return bus.RetryOrEnd(err, retryable, s.last, after, func() error {
		// The details (addresses, the transport's words) go to the log; the client
		// gets a stable message.
		w.Log.Warn("chat: model call failed", "job", jobID, "provider", model.Provider, "err", err)
		return w.fail(ctx, jobID, modelError(err, le, string(s.v.protocol)))
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
		t, err := wire.ChatTool(serverTools[name].schema(w, gp))
		if err != nil {
			return nil, nil, fmt.Errorf("the %s tool's schema: %w", name, err)
		}
		req.Tools = append(req.Tools, t)
	}
	return req, srcs, nil
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
