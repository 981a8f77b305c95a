package agent

import (
	"cmp"
	"context"
)

// openAI is OpenAI deep research (o3-deep-research, o4-mini-deep-research) through
// the Responses API in background mode: POST /responses with background and store,
// the web_search_preview tool (deep research needs a data source) and max_tool_calls
// by effort; GET /responses/{id} polls; POST /responses/{id}/cancel cancels. The
// fleet's reference rides in metadata.fleet_ref. OpenAI offers no idempotency key
// and no listing of responses, so Find returns ErrNoLookup; OpenAI's webhooks
// (response.completed/failed/cancelled/incomplete, Standard Webhooks, configured per
// project) name the response, whose metadata gives the run back (Status.Ref).
type openAI struct {
	*client
	noLookup
}

// openAIToolCalls is max_tool_calls per effort: the bound on searches and page opens
// a run may make, which bounds its cost.
var openAIToolCalls = [4]int{20, 60, 150, 300}

// openAIPrices are the documented list prices of the deep research models, per
// million input and output tokens, and per web search call (SOURCES.md): OpenAI
// reports usage, not cost, so the cost is computed from them.
var openAIPrices = map[string][2]float64{
	"o3-deep-research":      {10, 40},
	"o4-mini-deep-research": {2, 8},
}

const openAISearchUSD = 0.01 // $10 per 1,000 web search calls

func (a *openAI) modelFor(req Request) string {
	if req.Effort == "low" {
		return cmp.Or(req.Model, a.model, "o4-mini-deep-research")
	}
	return cmp.Or(req.Model, a.model, "o3-deep-research")
}

func (a *openAI) Submit(ctx context.Context, req Request) (string, error) {
	body := map[string]any{
		"model":          a.modelFor(req),
		"input":          req.Input,
		"background":     true,
		"store":          true,
		"tools":          []any{map[string]any{"type": "web_search_preview"}},
		"max_tool_calls": byEffort(req.Effort, openAIToolCalls),
		"reasoning":      map[string]any{"summary": "auto"},
		"metadata":       map[string]string{metaRef: req.Ref},
	}
	if req.Instructions != "" {
		body["instructions"] = req.Instructions
	}
	if len(req.OutputSchema) > 0 {
		body["text"] = map[string]any{"format": map[string]any{"type": "json_schema", "name": "research_output", "schema": req.OutputSchema, "strict": false}}
	}
	return a.submit(ctx, body, nil)
}

// openAIResponse is the part of a Response the agent reads.
type openAIResponse struct {
	ID                string            `json:"id"`
	Status            string            `json:"status"`
	Model             string            `json:"model"`
	Metadata          map[string]string `json:"metadata"`
	Error             *runError         `json:"error"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Output []struct {
		Type    string  `json:"type"`
		Summary summary `json:"summary"`
		Action  *struct {
			Type    string   `json:"type"`
			Query   string   `json:"query"`
			Queries []string `json:"queries"`
			URL     string   `json:"url"`
			Sources []struct {
				URL string `json:"url"`
			} `json:"sources"`
		} `json:"action"`
		Content []outputPart `json:"content"`
	} `json:"output"`
	Usage struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

func (a *openAI) Poll(ctx context.Context, id, cursor string) (Status, error) {
	var r openAIResponse
	if err := a.get(ctx, id, "", &r); err != nil {
		return Status{}, err
	}
	st := Status{Ref: r.Metadata[metaRef]}
	var events []Event
	searches, calls := 0, 0 // search actions; web search calls (each billed)
	var text string
	var anns []annotation
	for _, it := range r.Output {
		switch it.Type {
		case "reasoning":
			events = it.Summary.thoughts(events)
		case "web_search_call":
			calls++
			if it.Action == nil {
				continue
			}
			switch it.Action.Type {
			case "search":
				searches++
				q := it.Action.Query
				if q == "" && len(it.Action.Queries) > 0 {
					q = it.Action.Queries[0]
				}
				events = append(events, Event{Type: "search", Text: q})
			case "open_page", "find_in_page":
				events = append(events, Event{Type: "fetch", URL: it.Action.URL})
			}
		case "message":
			text, anns = joinOutputText(it.Content, "output_text", text, anns)
		}
	}
	st.Events, st.Cursor = afterCursor(events, cursor)
	price, ok := openAIPrices[cmp.Or(a.model, r.Model)]
	if !ok {
		price = openAIPrices["o3-deep-research"]
	}
	st.CostUSD = (float64(r.Usage.InputTokens)*price[0]+float64(r.Usage.OutputTokens)*price[1])/1e6 + float64(calls)*openAISearchUSD
	switch st.State = stateOf(r.Status); st.State {
	case Failed:
		st.Error = r.Error.failure()
	case Completed:
		st.Result = cited(text, anns, searches)
	}
	return st, nil
}
