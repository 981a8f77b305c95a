package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/search"
	"github.com/searchfleet/searchfleet/pkg/state"
)

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
	p := planState{searchLimit: w.searchLimit(v), fetchLimit: w.fetchLimit(v)}
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
// search, country, freshness, cache only) to a query the model wrote; the model's own
// filters stay where the request sets none, and the stricter max_age of the two wins.
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
	if o.MaxAge != nil && (q.MaxAge == nil || *o.MaxAge < *q.MaxAge) {
		q.MaxAge = o.MaxAge
	}
	if o.Cache != "" {
		q.Cache = o.Cache
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
		ps, err := w.Bus.PublishAsync(ctx, subject, req)
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
		return w.load(ctx, jobID, h+1, false)
	}
	return nil
}

// errAnswerStood is dispatch's word that another worker's answer to the hop was
// stored before this worker's (whose calls were planned from it, and not recorded):
// the step goes on from the stored answer.
var errAnswerStood = errors.New("another answer to the hop was stored first")
