package research

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/research/agent"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// agentPoll is how soon a provider run is polled again when its agent names no time.
const agentPoll = 5 * time.Second

// agentStep carries a run out through its provider agent: submit it once (after
// looking for one submitted before a crash, by the run's id as its reference),
// storing the provider's id under a claim at once; poll it on a schedule of
// redeliveries (never a sleeping goroutine), its events appended to the run's; once
// it has finished, its result becomes the run's draft (verified like the fleet's) or
// its failure the run's. Its price is held against the run's budget before it is
// submitted and settled at the provider's reported cost (else at the price).
func (w *Worker) agentStep(ctx context.Context, r *state.Run, req *Request) error {
	a := w.Agents[r.Agent]
	if a == nil {
		return w.fail(ctx, r, req, "agent_unavailable", fmt.Sprintf("The research agent %q is not available in this fleet.", clip(r.Agent, 64)))
	}
	price := 0.0
	if w.AgentPrice != nil {
		price = w.AgentPrice(r.Agent, req.Effort)
	}
	id := r.AgentID
	if id == "" {
		if err := w.Store.Research.ReserveRun(ctx, r.ID, "agent", price, req.Budget.MaxUSD); errors.Is(err, state.ErrRunBudget) {
			return w.fail(ctx, r, req, "budget", "The run's budget cannot pay for the research agent.")
		} else if err != nil {
			return err
		}
		// A provider with no lookup by reference (agent.ErrNoLookup) is submitted to
		// again after a crash between its submission and the claim: at most the one run
		// in flight at the kill.
		found, ok, err := a.Find(ctx, r.ID)
		if err != nil && !errors.Is(err, agent.ErrNoLookup) {
			return err
		}
		if !ok {
			if found, err = a.Submit(ctx, agent.Request{Ref: r.ID, Input: req.Input, Instructions: req.Instructions, Effort: req.Effort, OutputSchema: req.OutputSchema}); err != nil {
				return err
			}
		}
		if id, err = w.Store.Research.ClaimAgentRun(ctx, r.ID, found); err != nil {
			return err
		}
		if _, err := w.Store.Research.UpdateRun(ctx, r.ID, state.RunUpdate{Status: state.RunInProgress,
			Events: []state.RunEventIn{ev("agent:submitted", "agent.submitted", map[string]any{"agent": r.Agent})}}); err != nil {
			return err
		}
	}
	st, err := a.Poll(ctx, id, r.AgentCursor)
	if err != nil {
		return err
	}
	var events []state.RunEventIn
	for i, e := range st.Events {
		events = append(events, ev("agent:"+r.AgentCursor+":"+strconv.Itoa(i), e.Type, map[string]any{"text": clip(e.Text, 2000), "url": e.URL, "agent": r.Agent}))
	}
	u := state.RunUpdate{Events: events, Fields: []any{"agent_cursor", st.Cursor}}
	switch st.State {
	case agent.Completed:
		cost := price
		if st.Result != nil && st.Result.CostUSD > 0 {
			cost = st.Result.CostUSD
		} else if st.CostUSD > 0 {
			cost = st.CostUSD
		}
		if err := w.Store.Research.SettleRun(ctx, r.ID, "agent", "model", cost); err != nil {
			return err
		}
		b, _ := json.Marshal(draftOf(st.Result))
		u.First, u.Value = state.RunFieldDraft, b
		u.Events = append(u.Events, ev("draft", "draft", map[string]any{"agent": r.Agent}))
		_, err := w.Store.Research.UpdateRun(ctx, r.ID, u)
		return err
	case agent.Failed, agent.Cancelled:
		w.Store.Research.SettleRun(ctx, r.ID, "agent", "model", st.CostUSD) // a failed run is billed what the provider reports
		if _, err := w.Store.Research.UpdateRun(ctx, r.ID, u); err != nil {
			return err
		}
		if st.State == agent.Cancelled {
			return w.cancel(ctx, r)
		}
		msg := st.Error
		if msg == "" {
			msg = "The research agent's run failed."
		}
		return w.fail(ctx, r, req, "agent_failed", clip(msg, 500))
	}
	if _, err := w.Store.Research.UpdateRun(ctx, r.ID, u); err != nil {
		return err
	}
	after := st.RetryAfter
	if after <= 0 {
		after = agentPoll
	}
	return bus.Defer(after, errAgentRunning) // polled, not failed: not logged as a failure
}

// errAgentRunning: the provider's run goes on; the step looks again later.
var errAgentRunning = errors.New("research: the agent's run goes on")

// draftOf is a provider's result as a run's draft.
func draftOf(res *agent.Result) Draft {
	if res == nil {
		return Draft{}
	}
	d := Draft{Report: res.Report, Object: res.Output}
	for i, s := range res.Sources {
		d.Sources = append(d.Sources, Source{N: i + 1, URL: s.URL, Title: s.Title, Excerpt: s.Excerpt})
	}
	if len(res.Basis) > 0 {
		d.Basis = map[string]Basis{}
		for k, b := range res.Basis {
			var cites []Source
			for _, c := range b.Citations {
				cites = append(cites, Source{URL: c.URL, Title: c.Title, Excerpt: c.Excerpt})
			}
			d.Basis[k] = Basis{Citations: cites, Reasoning: b.Reasoning, Confidence: confidence(b.Confidence)}
		}
	}
	return d
}
