package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
)

// gemini is Gemini Deep Research through the Interactions API: POST
// /v1beta/interactions with the agent, background and store, and agent_config
// {type: deep-research, thinking_summaries: auto, collaborative_planning}; GET
// /v1beta/interactions/{id} polls; POST /v1beta/interactions/{id}/cancel cancels.
//
// With collaborative planning the interaction ends with a plan, not a report: the
// agent marks such an id "plan:<id>", so a poll that finds it completed reports
// RequiresPlan with the plan as an event; Approve runs the plan (as given, or as
// replaced) as a new interaction chained by previous_interaction_id with
// collaborative planning off, and returns its id.
//
// The Interactions API takes no idempotency key and lists no interactions, so Find
// returns ErrNoLookup; but each interaction carries the fleet's reference in
// webhook_config.user_metadata, which the project's webhook (interaction.completed,
// failed, cancelled; Standard Webhooks, a whsec_ secret) hands back with the
// interaction's id: a run lost between submit and store is found by its webhook.
type gemini struct {
	c     *client
	model string
}

const (
	geminiAgent    = "deep-research-preview-04-2026"
	geminiMaxAgent = "deep-research-max-preview-04-2026"
	geminiPlanMark = "plan:"
)

func (a *gemini) agentFor(req Request) string {
	switch {
	case req.Model != "":
		return req.Model
	case a.model != "":
		return a.model
	case req.Effort == "max":
		return geminiMaxAgent
	}
	return geminiAgent
}

func (a *gemini) create(ctx context.Context, body map[string]any) (string, error) {
	var out struct {
		ID string `json:"id"`
	}
	if err := a.c.do(ctx, "POST", "/v1beta/interactions", body, nil, &out); err != nil {
		return "", err
	}
	if out.ID == "" {
		return "", errors.New("the provider answered without an interaction id")
	}
	return out.ID, nil
}

func (a *gemini) Submit(ctx context.Context, req Request) (string, error) {
	input := req.Input
	if req.Instructions != "" {
		input = req.Instructions + "\n\n" + input
	}
	body := map[string]any{
		"input":        input,
		"agent":        a.agentFor(req),
		"background":   true,
		"store":        true,
		"agent_config": map[string]any{"type": "deep-research", "thinking_summaries": "auto", "collaborative_planning": req.ReviewPlan},
		"webhook_config": geminiWebhookConfig(req.Ref, req.ReviewPlan),
	}
	if len(req.OutputSchema) > 0 {
		body["response_format"] = map[string]any{"type": "text", "mime_type": "application/json", "schema": req.OutputSchema}
	}
	id, err := a.create(ctx, body)
	if err != nil {
		return "", err
	}
	if req.ReviewPlan {
		id = geminiPlanMark + id
	}
	return id, nil
}

func (a *gemini) Find(context.Context, string) (string, bool, error) { return "", false, ErrNoLookup }

// geminiWebhookConfig puts the fleet's reference (and whether the interaction is a
// plan) where the interaction's webhooks hand it back.
func geminiWebhookConfig(ref string, plan bool) map[string]any {
	meta := map[string]string{metaRef: ref}
	if plan {
		meta[metaPlan] = "true"
	}
	return map[string]any{"user_metadata": meta}
}

// metaPlan marks a Gemini planning interaction in its webhook metadata.
const metaPlan = "fleet_plan"

func (a *gemini) Approve(ctx context.Context, id, plan string) (string, error) {
	prev, ok := strings.CutPrefix(id, geminiPlanMark)
	if !ok {
		return "", errors.New("the run is not waiting for its plan to be approved")
	}
	input := "The plan looks good. Run the research as planned."
	if strings.TrimSpace(plan) != "" {
		input = "Run the research with this plan instead:\n\n" + plan
	}
	return a.create(ctx, map[string]any{
		"input":                   input,
		"agent":                   a.agentFor(Request{}),
		"previous_interaction_id": prev,
		"background":              true,
		"store":                   true,
		"agent_config":            map[string]any{"type": "deep-research", "thinking_summaries": "auto", "collaborative_planning": false},
	})
}

// geminiWebhookStates are the Interactions API's webhook event types for an
// interaction.
var geminiWebhookStates = map[string]State{
	"interaction.completed":       Completed,
	"interaction.requires_action": Completed,
	"interaction.failed":          Failed,
	"interaction.cancelled":       Cancelled,
}

// parseGeminiWebhook reads an interaction event: {type, version, timestamp, data:
// {id, user_metadata}}. A planning interaction's id comes back marked as Submit
// marks it.
func parseGeminiWebhook(body []byte) (Webhook, error) {
	var ev struct {
		Type string `json:"type"`
		Data struct {
			ID           string            `json:"id"`
			UserMetadata map[string]string `json:"user_metadata"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ev); err != nil || ev.Data.ID == "" {
		return Webhook{}, errBadWebhook
	}
	st, ok := geminiWebhookStates[ev.Type]
	if !ok {
		return Webhook{}, errBadWebhook
	}
	w := Webhook{ID: ev.Data.ID, Ref: ev.Data.UserMetadata[metaRef], State: st}
	if ev.Data.UserMetadata[metaPlan] == "true" {
		w.ID = geminiPlanMark + w.ID
	}
	return w, nil
}

func (a *gemini) Cancel(ctx context.Context, id string) error {
	id = strings.TrimPrefix(id, geminiPlanMark)
	return a.c.do(ctx, "POST", "/v1beta/interactions/"+url.PathEscape(id)+"/cancel", nil, nil, nil)
}

// geminiInteraction is the part of an Interaction the agent reads.
type geminiInteraction struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Steps  []struct {
		Type    string `json:"type"`
		Summary []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"summary"`
		Arguments struct {
			Queries []string `json:"queries"`
			URLs    []string `json:"urls"`
		} `json:"arguments"`
		Content []struct {
			Type        string       `json:"type"`
			Text        string       `json:"text"`
			Annotations []annotation `json:"annotations"`
		} `json:"content"`
	} `json:"steps"`
	Errors []struct {
		Message string `json:"message"`
	} `json:"errors"`
}

func (a *gemini) Poll(ctx context.Context, id, cursor string) (Status, error) {
	raw, plan := strings.CutPrefix(id, geminiPlanMark)
	var it geminiInteraction
	if err := a.c.do(ctx, "GET", "/v1beta/interactions/"+url.PathEscape(raw), nil, nil, &it); err != nil {
		return Status{}, err
	}
	return it.status(cursor, plan), nil
}

// status normalizes a polled interaction; plan says it is a planning interaction.
func (it *geminiInteraction) status(cursor string, plan bool) Status {
	var events []Event
	var text string
	var anns []annotation
	searches := 0
	for _, s := range it.Steps {
		switch s.Type {
		case "thought":
			for _, c := range s.Summary {
				if c.Text != "" {
					events = append(events, Event{Type: "thought", Text: c.Text})
				}
			}
		case "google_search_call":
			searches++
			for _, q := range s.Arguments.Queries {
				events = append(events, Event{Type: "search", Text: q})
			}
		case "url_context_call":
			for _, u := range s.Arguments.URLs {
				events = append(events, Event{Type: "fetch", URL: u})
			}
		case "model_output":
			// The report is the last run of model output (earlier ones are
			// interim notes between tool calls).
			text, anns = "", nil
			for _, c := range s.Content {
				if c.Type == "text" {
					shift := len([]rune(text))
					for _, an := range c.Annotations {
						an.StartIndex += shift
						an.EndIndex += shift
						anns = append(anns, an)
					}
					text += c.Text
				}
			}
		}
	}
	complete := it.Status == "completed" || it.Status == "incomplete"
	if plan && complete {
		events = append(events, Event{Type: "plan", Text: text})
	}
	var st Status
	st.Events, st.Cursor = afterCursor(events, cursor)
	switch {
	case it.Status == "queued":
		st.State = Queued
	case it.Status == "cancelled":
		st.State = Cancelled
	case it.Status == "failed" || it.Status == "budget_exceeded":
		st.State = Failed
		st.Error = "the provider's research failed"
		if len(it.Errors) > 0 && it.Errors[0].Message != "" {
			st.Error += ": " + it.Errors[0].Message
		}
	case complete && plan:
		st.State = RequiresPlan
	case complete:
		st.State = Completed
		var src sources
		res := &Result{Searches: searches}
		if out, basis := spanBasis(text, anns); out != nil {
			res.Output, res.Basis = out, basis
			res.Report = fieldReport(out, basis, &src)
		} else {
			res.Report = annotate(text, anns, &src)
		}
		res.Sources = src.list
		st.Result = res
	default:
		st.State = Running
	}
	return st
}
