package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"net/url"
	"strconv"
)

// exa is Exa's Agent API (beta, header Exa-Beta): POST /agent/runs with query,
// systemPrompt, effort (low, medium, high, max), outputSchema and the fleet's
// reference in metadata; GET /agent/runs/{id} polls the run (status, output text,
// structured and field-level grounding, costDollars); GET /agent/runs/{id}/events
// lists its stored events; POST /agent/runs/{id}/cancel cancels. Find lists the
// team's recent runs (GET /agent/runs) for one whose metadata carries the reference.
type exa struct {
	*client
}

const exaBeta = "agent-2026-05-07"

// exaFindPages bounds Find's listing: pages of exaPage runs, newest first (a run
// lost between submit and store is among the newest).
const (
	exaFindPages = 4
	exaPage      = 50
)

var exaEfforts = [4]string{"low", "medium", "high", "max"}

func (a *exa) Submit(ctx context.Context, req Request) (string, error) {
	body := map[string]any{
		"query":    req.Input,
		"effort":   cmp.Or(req.Model, a.model, byEffort(req.Effort, exaEfforts)),
		"metadata": map[string]string{metaRef: req.Ref},
	}
	if req.Instructions != "" {
		body["systemPrompt"] = req.Instructions
	}
	if len(req.OutputSchema) > 0 {
		body["outputSchema"] = req.OutputSchema
	}
	return a.submit(ctx, body, nil)
}

func (a *exa) Find(ctx context.Context, ref, _ string) (string, bool, error) {
	cursor := ""
	for range exaFindPages {
		q := url.Values{"limit": {strconv.Itoa(exaPage)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Data       []exaRun `json:"data"`
			HasMore    bool     `json:"hasMore"`
			NextCursor *string  `json:"nextCursor"`
		}
		if err := a.do(ctx, "GET", a.runs+"?"+q.Encode(), nil, nil, &page); err != nil {
			return "", false, err
		}
		for _, r := range page.Data {
			if r.Request != nil && r.Request.Metadata[metaRef] == ref {
				return r.ID, true, nil
			}
		}
		if !page.HasMore || page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	return "", false, nil
}

// exaRun is an agent_run object.
type exaRun struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	StopReason string `json:"stopReason"`
	Request    *struct {
		Metadata map[string]string `json:"metadata"`
	} `json:"request"`
	Output struct {
		Text       string          `json:"text"`
		Structured json.RawMessage `json:"structured"`
		Grounding  []struct {
			Field     string `json:"field"`
			Citations []struct {
				URL   string `json:"url"`
				Title string `json:"title"`
			} `json:"citations"`
			Confidence string `json:"confidence"`
		} `json:"grounding"`
	} `json:"output"`
	Usage struct {
		Searches int `json:"searches"`
	} `json:"usage"`
	CostDollars struct {
		Total float64 `json:"total"`
	} `json:"costDollars"`
}

func (a *exa) Poll(ctx context.Context, id, cursor string) (Status, error) {
	var run exaRun
	if err := a.get(ctx, id, "", &run); err != nil {
		return Status{}, err
	}
	st := Status{CostUSD: run.CostDollars.Total}
	if run.Request != nil {
		st.Ref = run.Request.Metadata[metaRef]
	}
	// The stored events after the cursor (the id of the last one handed out).
	var evs struct {
		Data []struct {
			ID    string `json:"id"`
			Event string `json:"event"`
		} `json:"data"`
	}
	if err := a.get(ctx, id, "/events?limit=100", &evs); err != nil {
		return Status{}, err
	}
	st.Cursor = cursor
	last, _ := strconv.Atoi(cursor)
	for _, e := range evs.Data {
		if n, err := strconv.Atoi(e.ID); err == nil && n <= last {
			continue
		}
		st.Events = append(st.Events, Event{Type: "status", Text: e.Event})
		st.Cursor = e.ID
	}
	switch st.State = stateOf(run.Status); st.State {
	case Failed:
		st.Error = failure(run.StopReason)
	case Completed:
		st.Result = run.result()
	}
	return st, nil
}

// result normalizes a completed run: grounding on structured fields becomes the
// basis of their top-level field; grounding on the text the report's sources.
func (r *exaRun) result() *Result {
	structured := r.Output.Structured
	if string(structured) == "null" {
		structured = nil
	}
	basis := map[string]Basis{}
	var textCites []Source
	for _, g := range r.Output.Grounding {
		bs := Basis{Citations: []Source{}, Confidence: g.Confidence}
		for _, c := range g.Citations {
			if c.URL != "" {
				bs.Citations = append(bs.Citations, Source{URL: c.URL, Title: c.Title})
			}
		}
		if g.Field == "text" || g.Field == "output.text" || len(structured) == 0 {
			textCites = append(textCites, bs.Citations...)
			continue
		}
		f := topField(g.Field)
		basis[f] = mergeBasis(basis[f], bs)
	}
	res := fielded(structured, r.Output.Text, basis, textCites)
	res.Searches = r.Usage.Searches
	return res
}
