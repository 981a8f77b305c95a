package agent

import (
	"cmp"
	"context"
)

// perplexity is Perplexity's Agent API in background mode: POST /v1/agent with a
// preset by effort (low, medium, high, xhigh for max) and background; GET
// /v1/agent/{id} polls the stored response (a JSON snapshot); POST
// /v1/agent/{id}/cancel cancels. Its search_results items give the searches and
// sources, the message's url_citation annotations the citations, and usage.cost the
// reported cost. The Agent API takes no client reference and lists nothing, so Find
// returns ErrNoLookup.
type perplexity struct {
	*client
	noLookup
}

var perplexityPresets = [4]string{"low", "medium", "high", "xhigh"}

func (a *perplexity) Submit(ctx context.Context, req Request) (string, error) {
	body := map[string]any{
		"preset":     byEffort(req.Effort, perplexityPresets),
		"input":      req.Input,
		"background": true,
	}
	if m := cmp.Or(req.Model, a.model); m != "" {
		body["model"] = m
	}
	if req.Instructions != "" {
		body["instructions"] = req.Instructions
	}
	if len(req.OutputSchema) > 0 {
		body["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "research_output", "schema": req.OutputSchema}}
	}
	return a.submit(ctx, body, nil)
}

// perplexityResponse is the part of an Agent API response the agent reads.
type perplexityResponse struct {
	ID     string    `json:"id"`
	Status string    `json:"status"`
	Error  *runError `json:"error"`
	Output []struct {
		Type    string   `json:"type"`
		Queries []string `json:"queries"`
		Results []struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Snippet string `json:"snippet"`
		} `json:"results"`
		Content []outputPart `json:"content"`
	} `json:"output"`
	Usage struct {
		ToolCallsDetails struct {
			WebSearch struct {
				Invocation int `json:"invocation"`
			} `json:"web_search"`
		} `json:"tool_calls_details"`
		Cost struct {
			TotalCost float64 `json:"total_cost"`
		} `json:"cost"`
	} `json:"usage"`
}

func (a *perplexity) Poll(ctx context.Context, id, cursor string) (Status, error) {
	var r perplexityResponse
	if err := a.get(ctx, id, "", &r); err != nil {
		return Status{}, err
	}
	var events []Event
	var src sources
	var text string
	var anns []annotation
	for _, it := range r.Output {
		switch it.Type {
		case "search_results":
			for _, q := range it.Queries {
				events = append(events, Event{Type: "search", Text: q})
			}
			for _, res := range it.Results {
				if res.URL != "" {
					src.add(Source{URL: res.URL, Title: res.Title, Excerpt: res.Snippet})
				}
			}
		case "message":
			text, anns = joinOutputText(it.Content, "output_text", text, anns)
		}
	}
	st := Status{CostUSD: r.Usage.Cost.TotalCost}
	st.Events, st.Cursor = afterCursor(events, cursor)
	switch st.State = stateOf(r.Status); st.State {
	case Failed:
		st.Error = r.Error.failure()
	case Completed:
		// The cited pages keep the search result's title and snippet: the excerpt
		// relied on.
		for i, an := range anns {
			if n, ok := src.index[an.URL]; ok && an.Title == "" {
				anns[i].Title = src.list[n-1].Title
			}
		}
		res := cited(text, anns, r.Usage.ToolCallsDetails.WebSearch.Invocation)
		lists := [][]Source{res.Sources}
		for _, b := range res.Basis {
			lists = append(lists, b.Citations)
		}
		for _, l := range lists {
			for i, s := range l {
				if n, ok := src.index[s.URL]; ok && s.Excerpt == "" {
					l[i].Excerpt = src.list[n-1].Excerpt
				}
			}
		}
		st.Result = res
	}
	return st, nil
}
