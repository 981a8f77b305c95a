package research

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/research/agent"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// A run that names an agent is carried out at the provider (pkg/research/agent):
//
//   - Submitted once, under a claim. The step takes the claim (agent_claim:<n>, first
//     write wins) before it submits and stores the provider's id as soon as the
//     provider answers (ClaimAgentRun). A step that finds the claim taken and no id
//     stored knows a worker died between the two: it reattaches with Find (Exa's
//     listing of recent runs, matched by the run id it was given as metadata;
//     Parallel's listing of the run's task group, which the step makes and stores
//     before it submits into it: agent.Grouper), or, where the provider offers no
//     lookup, waits for the provider's end webhook to name the run by that reference
//     (OpenAI, Gemini, when their webhooks reach the fleet), or fails the run
//     agent_lost (Perplexity, which documents neither; OpenAI and Gemini without
//     webhooks): it never submits blindly again, which would pay twice. A
//     submission the provider answered with an error was not accepted: the next
//     claim (n+1) may submit.
//   - Approved once: Gemini's approved plan runs as a new, paid interaction, under
//     the same discipline (agentApprove): a claim (agent_approve:<plan id>:<n>)
//     before the approval is submitted, the new id stored as soon as Gemini answers;
//     after a lost accept the approval's end webhook, whose metadata names the plan
//     it follows, stores its id, and without webhooks the run fails agent_lost.
//   - Polled with scheduled messages: a step that finds the provider's run going asks
//     to be redelivered after the poll interval (bus.Defer, a NakWithDelay); near the
//     consumer's delivery limit it publishes a fresh step instead. Nothing sleeps.
//   - Spend held: the agent's price for the run's effort (or the run's cap) is
//     reserved before it submits and settled at the cost the provider reports (the
//     price when it reports none; nothing for a run the provider does not bill). A
//     run whose reported cost passes its cap is cancelled at the provider.
//   - Checked like the fleet's own: the provider's result becomes the run's draft,
//     which the verification step checks as every report.

// AgentBackend is a configured research agent as the worker calls it.
type AgentBackend struct {
	Agent agent.Agent
	Kind  string
	// Price is what a run is expected to cost at an effort (config priceUSD).
	Price func(effort string) float64
	// Webhook is the fleet's URL for the provider's webhooks where the provider takes
	// one per run (Parallel); Webhooks reports that the provider's webhooks reach the
	// fleet with the run's reference (a run lost between submit and store, or
	// Gemini's approval lost between its accept and its store, is then found by its
	// end webhook: OpenAI, Gemini; Parallel's is found in its task group).
	Webhook  string
	Webhooks bool
}

// agentStepKey names the run's paid agent step in its budget.
const agentStepKey = "agent"

// defaultAgentPoll is how often a provider's run is polled.
const defaultAgentPoll = 10 * time.Second

func (w *Worker) agentPoll() time.Duration {
	if w.AgentPollEvery > 0 {
		return w.AgentPollEvery
	}
	return defaultAgentPoll
}

// errPollLater asks Handle to take the run's step again after the poll interval.
var errPollLater = errors.New("research: the provider's run goes on")

// agentStep submits a run to its agent, or polls it.
func (w *Worker) agentStep(ctx context.Context, r *state.Run, req *Request) error {
	b := w.Agents[r.Agent]
	if b == nil {
		return w.fail(ctx, r, req, "agent_unavailable", fmt.Sprintf("The research agent %q is not available in this fleet.", clip(r.Agent, 64)))
	}
	if !r.Deadline.IsZero() && time.Now().After(r.Deadline) {
		w.agentCancel(ctx, r)
		return w.fail(ctx, r, req, "deadline", "The run's deadline passed before the research agent finished.")
	}
	if r.AgentID == "" {
		return w.agentSubmit(ctx, r, req, b)
	}
	return w.agentPollOnce(ctx, r, req, b)
}

func (w *Worker) agentSubmit(ctx context.Context, r *state.Run, req *Request, b *AgentBackend) error {
	n, _ := strconv.Atoi(r.AgentCursor) // before submission the cursor counts refused submissions
	claim := "agent_claim:" + strconv.Itoa(n)
	ok, err := w.Store.Research.UpdateRun(ctx, r.ID, state.RunUpdate{Status: state.RunInProgress, First: claim, Value: []byte(w.ID)})
	if errors.Is(err, state.ErrAnswerStood) {
		return w.agentReattach(ctx, r, req, b, n)
	}
	if err != nil || !ok {
		return err // the run ended meanwhile (cancelled): nothing is submitted
	}
	price := b.Price(req.Effort)
	if price <= 0 {
		price = req.Budget.MaxUSD
	}
	if err := w.Store.Research.ReserveRun(ctx, r.ID, agentStepKey, price, req.Budget.MaxUSD); errors.Is(err, state.ErrRunBudget) {
		return w.fail(ctx, r, req, "budget", "The research agent's price for this effort is above the run's budget.")
	} else if err != nil {
		return err
	}
	// Where the provider lists runs only within a group (Parallel), the run's group
	// is made and stored before the submit: a run lost after it is listed there.
	if g, ok := b.Agent.(agent.Grouper); ok && r.AgentGroup == "" {
		group, err := g.Group(ctx, r.ID)
		if refused(err) {
			return w.agentRefused(ctx, r, req, 0, "the run")
		} else if err != nil {
			return bus.Retry(time.Second, err) // nothing was submitted: the retry takes the next claim
		}
		if _, err := w.Store.Research.UpdateRun(ctx, r.ID, state.RunUpdate{Fields: []any{"agent_group", group}}); err != nil {
			return err
		}
		r.AgentGroup = group
	}
	// A model the request names other than the agent's own name is the provider's
	// model: the Responses flow's "o4-mini-deep-research" runs that model.
	model := req.Model
	if model == r.Agent {
		model = ""
	}
	id, err := b.Agent.Submit(ctx, agent.Request{Ref: r.ID, Input: req.Input, Instructions: req.Instructions, Effort: req.Effort,
		OutputSchema: req.OutputSchema, Model: model, ReviewPlan: req.Plan == "review", Webhook: b.Webhook, Group: r.AgentGroup})
	if err != nil {
		return w.agentNotAccepted(ctx, r, req, "agent_cursor", n, 0, "the run", err)
	}
	w.failpoint("research.agent_accepted") // the provider has the run; its id is not stored
	if err := w.agentStore(ctx, r, id, "submitted"); !errors.Is(err, errPollLater) {
		return err
	}
	if got, err := w.Store.Research.GetRun(ctx, r.ID); err == nil && got.Status == state.RunCancelled {
		w.agentCancel(ctx, got) // cancelled while it was being submitted
		return nil
	}
	return errPollLater
}

// agentStore stores the provider's run id (first write wins) and schedules its poll.
func (w *Worker) agentStore(ctx context.Context, r *state.Run, id, how string) error {
	got, err := w.Store.Research.ClaimAgentRun(ctx, r.ID, id)
	if err != nil {
		return err
	}
	if _, err := w.Store.Research.UpdateRun(ctx, r.ID, state.RunUpdate{Fields: []any{"agent_cursor", ""},
		Events: []state.RunEventIn{ev("agent:"+how, "agent."+how, map[string]any{"agent": r.Agent, "provider_id": got})}}); err != nil {
		return err
	}
	return errPollLater
}

// agentReattach finds the run of a worker that died between the provider's accept
// of its submission (claim n) and the store of its id: the id found is stored; none
// found means the submission never reached the provider, and the next claim may
// submit; a provider with no lookup is left to its end webhook (agentUnfound).
func (w *Worker) agentReattach(ctx context.Context, r *state.Run, req *Request, b *AgentBackend, n int) error {
	id, found, err := "", false, error(nil)
	if _, grouped := b.Agent.(agent.Grouper); !grouped || r.AgentGroup != "" {
		id, found, err = b.Agent.Find(ctx, r.ID, r.AgentGroup)
	} // else no group was stored, so nothing was submitted into one: none
	switch {
	case err == nil && found:
		return w.agentStore(ctx, r, id, "reattached")
	case err == nil:
		_, err := w.Store.Research.UpdateRun(ctx, r.ID, state.RunUpdate{Fields: []any{"agent_cursor", strconv.Itoa(n + 1)}})
		return err // the next action takes the next claim
	case errors.Is(err, agent.ErrNoLookup):
		return w.agentUnfound(ctx, r, req, b, "The run")
	}
	return err
}

// agentUnfound waits for the end webhook of a paid call (what) lost between the
// provider's accept and its store, where the provider's webhooks reach the fleet
// (the step polls until AgentWebhook stores the id), else fails the run agent_lost:
// it never calls blindly again, which would pay twice.
func (w *Worker) agentUnfound(ctx context.Context, r *state.Run, req *Request, b *AgentBackend, what string) error {
	if b.Webhooks {
		return errPollLater
	}
	w.Store.Research.SettleRun(context.WithoutCancel(ctx), r.ID, agentStepKey, "agent", b.Price(req.Effort))
	return w.fail(ctx, r, req, "agent_lost", what+" may have been submitted to the research agent, which offers no way to find it again; it was not submitted twice.")
}

// agentApprove runs the approved plan at the provider once, as agentSubmit submits.
func (w *Worker) agentApprove(ctx context.Context, r *state.Run, req *Request, b *AgentBackend, events []state.RunEventIn) error {
	n, _ := strconv.Atoi(r.AgentApprovals)
	claim := "agent_approve:" + r.AgentID + ":" + strconv.Itoa(n)
	ok, err := w.Store.Research.UpdateRun(ctx, r.ID, state.RunUpdate{First: claim, Value: []byte(w.ID)})
	if errors.Is(err, state.ErrAnswerStood) {
		// No provider looks a lost approval up: its end webhook names the plan it
		// follows (agent.Planner).
		return w.agentUnfound(ctx, r, req, b, "The approved plan")
	}
	if err != nil || !ok {
		return err // the run ended meanwhile (cancelled): nothing is approved
	}
	var plan string
	if r.PlanReplaced {
		var p Plan
		json.Unmarshal(r.Plan, &p)
		for i, q := range p.Questions {
			plan += strconv.Itoa(i+1) + ". " + q.Question + "\n"
		}
	}
	p, ok := b.Agent.(agent.Planner)
	if !ok { // only a Planner's runs wait for their plan
		return w.fail(ctx, r, req, "agent_error", "The research agent has no plan to approve.")
	}
	next, err := p.Approve(ctx, r.ID, r.AgentID, plan)
	if err != nil {
		return w.agentNotAccepted(ctx, r, req, "agent_approvals", n, b.Price(req.Effort), "the approved plan", err)
	}
	w.failpoint("research.agent_approved") // the provider runs the plan; its id is not stored
	if _, err := w.Store.Research.UpdateRun(ctx, r.ID, approved(next, events)); err != nil {
		return err
	}
	return errPollLater
}

// agentNotAccepted acts on the error of a paid call under claim n (Submit,
// Approve): an error the provider answered means it did not accept, so the next
// claim may call again (counter n+1), and a refusal for good fails the run (settled
// at usd); without an answer it may have accepted, and the redelivery reattaches.
func (w *Worker) agentNotAccepted(ctx context.Context, r *state.Run, req *Request, counter string, n int, usd float64, what string, err error) error {
	var le *llm.Error
	if !errors.As(err, &le) || le.Status == 0 {
		return err
	}
	w.Store.Research.UpdateRun(ctx, r.ID, state.RunUpdate{Fields: []any{counter, strconv.Itoa(n + 1)}})
	if refused(err) {
		return w.agentRefused(ctx, r, req, usd, what)
	}
	return bus.Retry(max(le.RetryAfter, time.Second), err)
}

// agentRefused fails a run whose agent refused what (settled at usd).
func (w *Worker) agentRefused(ctx context.Context, r *state.Run, req *Request, usd float64, what string) error {
	w.Store.Research.SettleRun(context.WithoutCancel(ctx), r.ID, agentStepKey, "agent", usd)
	return w.fail(ctx, r, req, "agent_error", "The research agent refused "+what+".")
}

// refused reports whether err is a provider's refusal for good: a 4xx other than
// 408 and 429.
func refused(err error) bool {
	var le *llm.Error
	return errors.As(err, &le) && le.Status >= 400 && le.Status < 500 && le.Status != 429 && le.Status != 408
}

// approved is the update that makes next the provider id of a run, in place of its
// plan's.
func approved(next string, events []state.RunEventIn) state.RunUpdate {
	return state.RunUpdate{Fields: []any{state.RunFieldAgentID, next, "agent_cursor", ""},
		Events: append(events, ev("agent:approved", "agent.approved", map[string]any{"provider_id": next}))}
}

// agentCancel asks the provider to stop the run's provider run, when it has one.
func (w *Worker) agentCancel(ctx context.Context, r *state.Run) {
	b := w.Agents[r.Agent]
	if b == nil || r.AgentID == "" {
		return
	}
	if err := b.Agent.Cancel(ctx, r.AgentID); err != nil {
		w.log().Warn("research: cancelling a provider's run", "run", r.ID, "agent", r.Agent, "err", err)
	}
}

// agentPollOnce polls the provider's run once and acts on what it says.
func (w *Worker) agentPollOnce(ctx context.Context, r *state.Run, req *Request, b *AgentBackend) error {
	st, err := b.Agent.Poll(ctx, r.AgentID, r.AgentCursor)
	if err != nil {
		var le *llm.Error
		if errors.As(err, &le) && le.Status == 404 {
			return w.fail(ctx, r, req, "agent_error", "The research agent no longer knows the run.")
		}
		return bus.Retry(w.agentPoll(), err)
	}
	var events []state.RunEventIn
	for i, e := range st.Events {
		key := "agent:" + r.AgentID + ":" + r.AgentCursor + ":" + strconv.Itoa(i)
		events = append(events, ev(key, "agent."+e.Type, map[string]any{"text": clip(e.Text, 2000), "url": e.URL}))
	}
	fields := []any{"agent_cursor", st.Cursor}
	if m := req.Budget.MaxUSD; m > 0 && st.CostUSD > m && !st.State.Done() {
		w.agentCancel(ctx, r)
		fields = append(fields, "incomplete", "budget")
		w.Store.Research.UpdateRun(ctx, r.ID, state.RunUpdate{Fields: fields, Events: append(events, ev("agent:over-budget", "stopped", map[string]any{"reason": "budget", "reported_cost_usd": st.CostUSD}))})
		w.Store.Research.SettleRun(context.WithoutCancel(ctx), r.ID, agentStepKey, "agent", st.CostUSD)
		return w.fail(ctx, r, req, "budget", "The research agent's reported cost passed the run's budget; the run was cancelled at the provider.")
	}
	// An ended run settles at the cost the provider reports; at the agent's price
	// when it reports none but bills the run.
	cost := st.CostUSD
	if cost <= 0 && !st.Unbilled && st.State != agent.Cancelled {
		cost = b.Price(req.Effort)
	}
	switch st.State {
	case agent.Completed:
		if err := w.Store.Research.SettleRun(ctx, r.ID, agentStepKey, "agent", cost); err != nil {
			return err
		}
		d := Draft{Report: st.Result.Report, Object: st.Result.Output}
		for i, s := range st.Result.Sources {
			s.N = i + 1
			d.Sources = append(d.Sources, s)
		}
		for k, v := range st.Result.Basis {
			if d.Basis == nil {
				d.Basis = map[string]Basis{}
			}
			if v.Citations == nil {
				v.Citations = []Source{}
			}
			d.Basis[k] = v
		}
		db, _ := json.Marshal(d)
		_, err := w.Store.Research.UpdateRun(ctx, r.ID, state.RunUpdate{First: state.RunFieldDraft, Value: db, Fields: fields,
			Events: append(events, ev("draft", "draft", map[string]any{"chars": len(d.Report), "sources": len(d.Sources), "agent": r.Agent}))})
		return err
	case agent.Failed, agent.Cancelled:
		w.Store.Research.SettleRun(context.WithoutCancel(ctx), r.ID, agentStepKey, "agent", cost)
		w.Store.Research.UpdateRun(ctx, r.ID, state.RunUpdate{Fields: fields, Events: events})
		if st.State == agent.Cancelled {
			return w.cancel(ctx, r)
		}
		return w.fail(ctx, r, req, "agent_failed", clip(cmp.Or(st.Error, "The research agent's run failed."), 500))
	case agent.RequiresPlan:
		if r.Approved {
			return w.agentApprove(ctx, r, req, b, events)
		}
		if r.Status == state.RunRequiresAction {
			return nil
		}
		var text string
		for _, e := range st.Events {
			if e.Type == "plan" {
				text = e.Text
			}
		}
		pb, _ := json.Marshal(Plan{Questions: []SubQuestion{{Question: clip(text, maxQuestionChars)}}})
		return w.review(ctx, r, req, pb, append(fields, state.RunPlanField, pb), events)
	}
	if _, err := w.Store.Research.UpdateRun(ctx, r.ID, state.RunUpdate{Status: state.RunInProgress, Fields: fields, Events: events}); err != nil {
		return err
	}
	return errPollLater
}

// AgentWebhook takes a provider's webhook for the agent name: verified with the
// agent's secret, it names a provider run; the run it belongs to (by the reference
// the webhook or, polled, the provider's run carries) takes a step at once, and a run
// whose worker died between submit and store gets its id. It reports false for a
// webhook that does not verify.
func (s *Service) AgentWebhook(ctx context.Context, name string, h map[string][]string, body []byte) (bool, error) {
	b := s.Backends[name]
	secret := s.WebhookSecrets[name]
	if b == nil || secret == "" {
		return false, nil
	}
	wh, err := agent.VerifyWebhook(b.Kind, secret, h, body, time.Now())
	if err != nil {
		return false, nil
	}
	ref, follows := wh.Ref, wh.Follows
	if ref == "" {
		st, err := b.Agent.Poll(ctx, wh.ID, "")
		if err != nil {
			return true, err
		}
		ref, follows = st.Ref, cmp.Or(follows, st.Follows)
	}
	r, err := s.Store.Research.GetRun(ctx, ref)
	if errors.Is(err, state.ErrNotFound) || err == nil && r.Agent != name {
		return true, nil // not a run of this fleet's
	}
	if err != nil {
		return true, err
	}
	switch {
	case r.AgentID == "" && follows == "":
		if _, err := s.Store.Research.ClaimAgentRun(ctx, r.ID, wh.ID); err != nil {
			return true, err
		}
	case follows != "" && r.AgentID == follows:
		// The run of an approved plan whose worker died between the approval's
		// accept and its store: it replaces the plan's id.
		if _, err := s.Store.Research.UpdateRun(ctx, r.ID, approved(wh.ID, nil)); err != nil {
			return true, err
		}
	}
	return true, s.Bus.Publish(ctx, runSubject(r), bus.ResearchStep{RunID: r.ID, Why: "agent webhook"})
}
