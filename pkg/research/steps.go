package research

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/chat"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/spend"
	"github.com/searchfleet/searchfleet/pkg/state"
	"github.com/searchfleet/searchfleet/pkg/webhook"
)

var (
	// errSpent: the run's budget (or its tenant's) refused a brain call.
	errSpent = errors.New("research: the budget is spent")
	// errNoBrain: the run's brain is not a configured model.
	errNoBrain = errors.New("research: no such model")
)

// defaultMaxOutput bounds a brain call's answer when its model's pricing names no
// output limit: its worst case is reserved with it.
const defaultMaxOutput = 4096

// brain makes one paid brain call for step, reserved first against the run's budget
// and its tenant's and settled at what it cost: errSpent when either refused it.
func (w *Worker) brain(ctx context.Context, r *state.Run, req *Request, step string, wr *wire.Request) (string, error) {
	m, ok := w.Models[req.Brain]
	if !ok {
		return "", errNoBrain
	}
	wr.Model = m.Upstream
	call, err := m.Client.Prepare(wr, false)
	if err != nil {
		return "", errNoBrain
	}
	est := m.Pricing.Cost(promptTokens(wr), maxOutput(m))
	if err := w.Store.Research.ReserveRun(ctx, r.ID, step, est, req.Budget.MaxUSD); errors.Is(err, state.ErrRunBudget) {
		return "", errSpent
	} else if err != nil {
		return "", err
	}
	settle, err := w.reserveTenant(ctx, r, req, step, est)
	if errors.Is(err, errSpent) {
		w.Store.Research.SettleRun(ctx, r.ID, step, "model", 0)
	}
	if err != nil {
		return "", err
	}
	timeout := w.ModelTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	mctx, cancel := context.WithTimeout(ctx, timeout)
	t, err := m.Client.Complete(mctx, call, nil)
	cancel()
	cost := 0.0
	if err == nil {
		cost = m.Pricing.Cost(t.Usage.PromptTokens, t.Usage.CompletionTokens)
	}
	if serr := w.Store.Research.SettleRun(context.WithoutCancel(ctx), r.ID, step, "model", cost); serr != nil {
		w.log().Warn("research: settling a brain call", "run", r.ID, "step", step, "err", serr)
	}
	settle(cost)
	if err != nil {
		return "", err
	}
	return t.Text(), nil
}

// maxOutput is a brain call's worst-case answer in tokens.
func maxOutput(m chat.Model) int {
	if m.Pricing.MaxOutputTokens > 0 {
		return m.Pricing.MaxOutputTokens
	}
	return defaultMaxOutput
}

// reserveTenant reserves a brain call's worst case est against the run's tenant's
// budget and, for a batch line's run, its batch's cap (the line's job holds the
// call in its ledger): errSpent when one refused. settle sets what the call cost.
func (w *Worker) reserveTenant(ctx context.Context, r *state.Run, req *Request, step string, est float64) (settle func(usd float64), err error) {
	settle = func(float64) {}
	if est <= 0 || w.Budgets == nil && req.Line == "" {
		return settle, nil
	}
	var b spend.Budget
	if w.Budgets != nil {
		b = w.Budgets.For(r.Tenant)
	}
	call := r.ID + ":" + step
	var ex *spend.Exhausted
	if req.Line != "" {
		var h *state.Hold
		if h, ex, err = w.Store.Ledger.ReserveCall(ctx, req.Line, r.Tenant, call, est, b, time.Now()); h != nil {
			settle = func(usd float64) { w.Store.Ledger.SettleCall(context.WithoutCancel(ctx), h, usd, 0) }
		}
	} else {
		var res *state.Reservation
		if res, ex, err = w.Store.Ledger.ReserveSpend(ctx, r.Tenant, call, est, b, time.Now()); res != nil {
			settle = func(usd float64) { w.Store.Ledger.SettleSpend(context.WithoutCancel(ctx), res, usd, 0) }
		}
	}
	if err == nil && ex != nil {
		err = errSpent
	}
	return settle, err
}

// promptTokens bounds a request's input tokens by its text (3 bytes a token at
// least, as the chain's reservations count).
func promptTokens(wr *wire.Request) int {
	n := len(wr.System)
	for _, m := range wr.Messages {
		for _, p := range m.Parts {
			n += len(p.Text)
		}
	}
	return n/3 + 16
}

// reflect asks the brain for the gaps round left, and writes the next round's
// sub-questions when it names any.
func (w *Worker) reflect(ctx context.Context, r *state.Run, req *Request, round int) error {
	e := EffortOf(req.Effort)
	findings := findingsOf(r)
	text, err := w.brain(ctx, r, req, fmt.Sprintf("reflect:%d", round), reflectRequest(req, e, findings))
	if err != nil {
		return w.brainFailed(ctx, r, req, err)
	}
	asked := map[string]bool{}
	for _, f := range findings {
		asked[f.Question] = true
	}
	ref := parseReflection(text, e.PerRound, asked)
	b, _ := json.Marshal(ref)
	u := state.RunUpdate{First: state.RunReflectionField(round), Value: b,
		Events: []state.RunEventIn{ev(fmt.Sprintf("reflection:%d", round), "reflection", map[string]any{"round": round, "gaps": ref.Gaps})}}
	if len(ref.Gaps) > 0 {
		qs, _ := json.Marshal(ref.Gaps)
		u.Fields = []any{state.RunQuestionsField(round + 1), qs}
	}
	_, err = w.Store.Research.UpdateRun(ctx, r.ID, u)
	return err
}

// findingsOf are a run's findings in order (round, then index).
func findingsOf(r *state.Run) []Finding {
	var out []Finding
	for _, b := range r.Findings {
		var f Finding
		if json.Unmarshal(b, &f) == nil {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b Finding) int { return cmp.Or(cmp.Compare(a.Round, b.Round), cmp.Compare(a.Index, b.Index)) })
	return out
}

// write asks the brain for the report (and the structured output) from the
// findings; when the budget refuses the call, or the brain's answer is unusable, the
// report is composed from the findings themselves.
func (w *Worker) write(ctx context.Context, r *state.Run, req *Request) error {
	findings := findingsOf(r)
	sources, numbered := number(findings)
	var d Draft
	text, err := w.brain(ctx, r, req, "write", writeRequest(req, numbered, sources))
	var fields []any
	switch {
	case errors.Is(err, errSpent):
		fields = []any{"incomplete", "budget"}
		d = compose(numbered, sources)
	case err != nil:
		return w.brainFailed(ctx, r, req, err)
	default:
		d = parseDraft(text, sources)
		if d.Report == "" {
			d = compose(numbered, sources)
		}
	}
	if len(req.OutputSchema) > 0 && d.Object == nil {
		d.Object, d.Basis = objectFrom(req.OutputSchema, numbered, sources)
	}
	b, _ := json.Marshal(d)
	_, err = w.Store.Research.UpdateRun(ctx, r.ID, state.RunUpdate{First: state.RunFieldDraft, Value: b, Fields: fields,
		Events: []state.RunEventIn{ev("draft", "draft", map[string]any{"chars": len(d.Report), "sources": len(d.Sources)})}})
	return err
}

// verify checks the draft's citations and stores the verified output.
func (w *Worker) verify(ctx context.Context, r *state.Run) error {
	var d Draft
	if err := json.Unmarshal(r.Draft, &d); err != nil {
		return fmt.Errorf("research: run %s: unreadable draft: %w", r.ID, err)
	}
	out := Verify(d)
	b, _ := json.Marshal(out)
	_, err := w.Store.Research.UpdateRun(ctx, r.ID, state.RunUpdate{First: state.RunFieldResult, Value: b,
		Events: []state.RunEventIn{ev("verification", "verification", map[string]any{"citations": out.Citations})}})
	return err
}

// complete ends the run completed and tells its callback.
func (w *Worker) complete(ctx context.Context, r *state.Run, req *Request) error {
	ok, err := w.Store.Research.UpdateRun(ctx, r.ID, state.RunUpdate{Status: state.RunCompleted,
		Events: []state.RunEventIn{ev("done", "done", map[string]any{"status": state.RunCompleted, "incomplete": r.Incomplete})}})
	if err != nil || !ok {
		return err
	}
	w.failpoint("research.after_end")
	return w.ended(ctx, r.ID, req)
}

// fail ends the run failed, with a client-safe reason.
func (w *Worker) fail(ctx context.Context, r *state.Run, req *Request, code, msg string) error {
	e, _ := json.Marshal(map[string]string{"code": code, "message": msg})
	ok, err := w.Store.Research.UpdateRun(ctx, r.ID, state.RunUpdate{Status: state.RunFailed, Fields: []any{"error", e},
		Events: []state.RunEventIn{ev("done", "done", map[string]any{"status": state.RunFailed, "error": json.RawMessage(e)})}})
	if err != nil || !ok {
		return err
	}
	w.failpoint("research.after_end")
	w.cancelChildren(ctx, r)
	return w.ended(ctx, r.ID, req)
}

// cancel ends a run a client cancelled (unless the API did), cancels its children
// that still run, and tells its callback (once: the delivery's id is the run's).
func (w *Worker) cancel(ctx context.Context, r *state.Run) error {
	if !state.RunEnded(r.Status) {
		if _, err := w.Store.Research.UpdateRun(ctx, r.ID, state.RunUpdate{Status: state.RunCancelled,
			Events: []state.RunEventIn{ev("done", "done", map[string]any{"status": state.RunCancelled})}}); err != nil {
			return err
		}
		w.agentCancel(ctx, r) // cancel reaches the provider
	}
	if err := w.cancelChildren(ctx, r); err != nil {
		return err
	}
	var req Request
	json.Unmarshal(r.Request, &req)
	return w.ended(ctx, r.ID, &req)
}

// cancelChildren ends every child of the run that has not ended, cancelled.
func (w *Worker) cancelChildren(ctx context.Context, r *state.Run) error {
	var errs []error
	for round, rd := range r.Rounds {
		for i := range rd.Submitted {
			id := childID(r.ID, round, i)
			if _, done := r.Ended[id]; done {
				continue
			}
			if err := w.Ender.End(ctx, id, jobs.Ending{Status: state.Cancelled}); err != nil && !errors.Is(err, jobs.ErrUnknownJob) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// stop notes why the run stops spending and ends its children that still run; it
// then writes from what it has.
func (w *Worker) stop(ctx context.Context, r *state.Run, reason string) error {
	if err := w.cancelChildren(ctx, r); err != nil {
		return err
	}
	_, err := w.Store.Research.UpdateRun(ctx, r.ID, state.RunUpdate{Fields: []any{"incomplete", reason},
		Events: []state.RunEventIn{ev("stopped", "stopped", map[string]any{"reason": reason})}})
	return err
}

// ended tells the callback of a run that ended, and ends its batch line's job.
func (w *Worker) ended(ctx context.Context, id string, req *Request) error {
	r, err := w.Store.Research.GetRun(ctx, id)
	if err != nil {
		return err
	}
	if err := w.endLine(ctx, r, req); err != nil {
		return err
	}
	return w.notify(ctx, r, req, r.Status)
}

// endLine ends the job of the batch line that made an ended run, as the run ended:
// completed with the run (as GET /v1/research/{id} shows it) as its response, failed
// with the run's error, or cancelled. The batch counts the line from the job's end.
func (w *Worker) endLine(ctx context.Context, r *state.Run, req *Request) error {
	if req.Line == "" || !state.RunEnded(r.Status) {
		return nil
	}
	end := jobs.Ending{Status: state.Cancelled}
	switch r.Status {
	case state.RunCompleted:
		b, err := json.Marshal(ViewOf(r))
		if err != nil {
			return err
		}
		end = jobs.Ending{Status: state.Completed, Response: b}
	case state.RunFailed:
		var e struct{ Code, Message string }
		json.Unmarshal(r.Error, &e)
		end = jobs.Ending{Status: state.Failed, Error: &state.JobError{Type: "research_failed", Code: e.Code, Message: e.Message}}
	}
	if err := w.Ender.End(ctx, req.Line, end); err != nil && !errors.Is(err, jobs.ErrUnknownJob) {
		return err
	}
	return nil
}

// hookDue reports whether a run's callback is owed a delivery of the run's status
// that was not queued: the run ended (or waits at requires_action), its callback
// wants that status, and the run's record does not say the delivery was queued. The
// step that ended the run queues it; a step redelivered after that one died finds
// it owed and queues it (next: actNotify), so the end and its delivery are one.
func (w *Worker) hookDue(r *state.Run, req *Request) bool {
	if r.Notified == r.Status || !state.RunEnded(r.Status) && r.Status != state.RunRequiresAction {
		return false
	}
	_, ok := w.callback(req, r.Status)
	return ok
}

// callback is the run's callback when it wants status (requires_action always: the
// run waits for the client).
func (w *Worker) callback(req *Request, status string) (webhook.Callback, bool) {
	if w.Webhooks == nil || len(req.Callback) == 0 {
		return webhook.Callback{}, false
	}
	cb, err := webhook.DecodeCallback(req.Callback)
	return cb, err == nil && (status == state.RunRequiresAction || cb.Wants(status))
}

// notify enqueues the callback's delivery of a run event ("completed", "failed",
// "cancelled" when the callback asks for it; "requires_action" always): Standard Webhooks,
// event type "research.<status>", the run as GET /v1/research/{id} shows it. The
// delivery's id is the run's and the status's, so queueing it again (a redelivered
// step) is a duplicate the stream drops; once queued, the run's record says so.
func (w *Worker) notify(ctx context.Context, r *state.Run, req *Request, status string) error {
	cb, ok := w.callback(req, status)
	if !ok {
		return nil
	}
	d, err := webhook.NewDelivery(bus.WebhookDelivery{Tenant: r.Tenant, JobID: r.ID, URL: cb.URL}, "research", status, r.Updated, ViewOf(r))
	if err != nil {
		return err
	}
	if err := w.Webhooks.Enqueue(ctx, d); err != nil {
		return err
	}
	return w.Store.Research.RunNotified(ctx, r.ID, status)
}
