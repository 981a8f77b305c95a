package research

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Hook is the finish hook that tells a research run one of its children ended: run
// from the child's terminal event by the finisher (pkg/jobs), so it is durable — a
// hook that fails is retried with the event, and a process that dies after the
// child's end loses nothing. It counts the child in its run once (its finding, its
// spend, an event per search and fetch it made) and publishes the run's step.
type Hook struct {
	Bus   *bus.Bus
	Store *state.Store
	Log   *slog.Logger
}

// JobFinished handles a job that ended: nothing unless it is a run's child.
func (h Hook) JobFinished(ctx context.Context, job *state.Job) error {
	if job == nil || job.Parent == "" || !job.Status.Terminal() {
		return nil
	}
	round, index, ok := roundOf(job.Parent, job.ID)
	if !ok {
		return nil
	}
	f, model, search, events := findingOf(job, round, index)
	b, _ := json.Marshal(f)
	_, _, err := h.Store.Research.ChildEnded(ctx, job.Parent, round, job.ID, string(job.Status), model, search, b, events)
	if errors.Is(err, state.ErrNotFound) {
		if h.Log != nil {
			h.Log.Warn("research: a child of a run Redis does not know", "job", job.ID, "run", job.Parent)
		}
		return nil
	}
	if err != nil {
		return err
	}
	return h.Bus.Publish(ctx, stepSubject(job.Tenant, job.Batch), bus.ResearchStep{RunID: job.Parent, Why: "end:" + job.ID})
}

// findingOf is what a child found, read from its ended job: its answer's text and
// sources (each source's excerpt the passage of the answer that cited it, or the text
// of the page read), what it spent, and an event per search and fetch it made.
func findingOf(job *state.Job, round, index int) (Finding, float64, float64, []state.RunEventIn) {
	f := Finding{Round: round, Index: index, Question: job.Question, Status: string(job.Status)}
	var events []state.RunEventIn
	var trace []wire.TraceEntry
	if len(job.Trace) > 0 {
		json.Unmarshal(job.Trace, &trace)
	}
	pages := map[string]string{} // a page read's text, by the URL it was read at
	for _, t := range trace {
		key := fmt.Sprintf("call:%s:%d:%s", job.ID, t.Hop, t.CallID)
		if t.Tool == wire.FetchName {
			f.Fetches++
			events = append(events, ev(key, "fetch", map[string]any{"job_id": job.ID, "url": t.URL, "error": t.Error}))
			if t.Error == "" {
				pages[t.URL] = clip(t.Excerpt, 2000)
				for _, s := range t.Sources {
					pages[s.URL] = pages[t.URL]
				}
			}
			continue
		}
		f.Searches++
		events = append(events, ev(key, "search", map[string]any{"job_id": job.ID, "query": t.Query, "engine": t.Engine, "sources": len(t.Sources), "error": t.Error}))
	}
	var model, search float64
	if job.Status == state.Completed && len(job.Response) > 0 {
		if resp, err := wire.DecodeAnswer(job.Response); err == nil {
			f.Text = strings.TrimSpace(strings.TrimPrefix(resp.Text(), "(simulated answer)"))
			for i, s := range resp.Sources {
				ex := pages[s.URL]
				if ex == "" {
					ex = excerptOf(f.Text, i+1) // scans the text: only for a page with no excerpt of its own
				}
				f.Sources = append(f.Sources, Source{URL: s.URL, Title: s.Title, Excerpt: ex})
			}
			if sp := resp.Usage.Spend; sp != nil {
				model, search = sp.ModelCostUSD, sp.SearchCostUSD
			}
		}
	}
	f.CostUSD = model + search
	events = append(events, ev("finished:"+job.ID, "subquestion.finished", map[string]any{"round": round, "index": index, "job_id": job.ID,
		"status": job.Status, "sources": len(f.Sources), "searches": f.Searches, "fetches": f.Fetches}))
	return f, model, search, events
}

// excerptOf is the passage of a text that cites [n]: its sentences with the marker,
// without markers.
func excerptOf(text string, n int) string {
	mark := fmt.Sprintf("[%d]", n)
	var out []string
	for _, s := range sentences(text) {
		if strings.Contains(s, mark) {
			out = append(out, plain(s))
		}
	}
	return clip(strings.Join(out, " "), 2000)
}
