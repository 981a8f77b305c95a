package agent

import (
	"cmp"
	"context"
	"errors"
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
// collaborative planning off, the fleet's reference and the planning interaction's
// id in its user metadata, and returns its id.
//
// The Interactions API takes no idempotency key and lists no interactions, so Find
// returns ErrNoLookup; but each interaction carries the fleet's reference in
// webhook_config.user_metadata, which the project's webhook (interaction.completed,
// failed, cancelled; Standard Webhooks, a whsec_ secret) hands back with the
// interaction's id: a run lost between submit and store is found by its webhook,
// and so is an approval lost between its accept and its store (the approval's
// webhook names the planning interaction it follows).
type gemini struct {
	*client
	noLookup
}

const (
	geminiAgent    = "deep-research-preview-04-2026"
	geminiMaxAgent = "deep-research-max-preview-04-2026"
	geminiPlanMark = "plan:"
)

func (a *gemini) agentFor(req Request) string {
	if req.Effort == "max" {
		return cmp.Or(req.Model, a.model, geminiMaxAgent)
	}
	return cmp.Or(req.Model, a.model, geminiAgent)
}

func (a *gemini) Submit(ctx context.Context, req Request) (string, error) {
	meta := map[string]string{metaRef: req.Ref}
	if req.ReviewPlan {
		meta[metaPlan] = "true"
	}
	body := geminiBody(joinInstructions(req), a.agentFor(req), req.ReviewPlan, meta)
	if len(req.OutputSchema) > 0 {
		body["response_format"] = map[string]any{"type": "text", "mime_type": "application/json", "schema": req.OutputSchema}
	}
	id, err := a.submit(ctx, body, nil)
	if err != nil {
		return "", err
	}
	if req.ReviewPlan {
		id = geminiPlanMark + id
	}
	return id, nil
}

// geminiBody is a new background interaction's body: input to the agent, planning
// collaboratively or not, its webhooks handing back meta.
func geminiBody(input, agent string, planning bool, meta map[string]string) map[string]any {
	return map[string]any{
		"input":          input,
		"agent":          agent,
		"background":     true,
		"store":          true,
		"agent_config":   map[string]any{"type": "deep-research", "thinking_summaries": "auto", "collaborative_planning": planning},
		"webhook_config": map[string]any{"user_metadata": meta},
	}
}

// metaPlan marks a Gemini planning interaction in its webhook metadata.
const metaPlan = "fleet_plan"

func (a *gemini) Approve(ctx context.Context, ref, id, plan string) (string, error) {
	prev, ok := strings.CutPrefix(id, geminiPlanMark)
	if !ok {
		return "", errors.New("the run is not waiting for its plan to be approved")
	}
	input := "The plan looks good. Run the research as planned."
	if strings.TrimSpace(plan) != "" {
		input = "Run the research with this plan instead:\n\n" + plan
	}
	body := geminiBody(input, a.agentFor(Request{}), false, map[string]string{metaRef: ref, metaAfter: prev})
	body["previous_interaction_id"] = prev
	return a.submit(ctx, body, nil)
}

// metaAfter names, in an approval's webhook metadata, the planning interaction it
// runs the plan of.
const metaAfter = "fleet_after"

// geminiFollows is the planning interaction an approval's metadata names, marked as
// Submit marks it ("" none).
func geminiFollows(meta map[string]string) string {
	if after := meta[metaAfter]; after != "" {
		return geminiPlanMark + after
	}
	return ""
}

func (a *gemini) Cancel(ctx context.Context, id string) error {
	return a.client.Cancel(ctx, strings.TrimPrefix(id, geminiPlanMark))
}

// geminiInteraction is the part of an Interaction the agent reads.
type geminiInteraction struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	// WebhookConfig is echoed as it was given (the Interaction resource's
	// webhook_config): its user metadata names the run, and an approval's the plan it
	// follows.
	WebhookConfig struct {
		UserMetadata map[string]string `json:"user_metadata"`
	} `json:"webhook_config"`
	Steps []struct {
		Type      string  `json:"type"`
		Summary   summary `json:"summary"`
		Arguments struct {
			Queries []string `json:"queries"`
			URLs    []string `json:"urls"`
		} `json:"arguments"`
		Content []outputPart `json:"content"`
	} `json:"steps"`
	Errors []runError `json:"errors"`
}

func (a *gemini) Poll(ctx context.Context, id, cursor string) (Status, error) {
	raw, plan := strings.CutPrefix(id, geminiPlanMark)
	var it geminiInteraction
	if err := a.get(ctx, raw, "", &it); err != nil {
		return Status{}, err
	}
	var events []Event
	var text string
	var anns []annotation
	searches := 0
	for _, s := range it.Steps {
		switch s.Type {
		case "thought":
			events = s.Summary.thoughts(events)
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
			text, anns = joinOutputText(s.Content, "text", "", nil)
		}
	}
	complete := it.Status == "completed" || it.Status == "incomplete"
	if plan && complete {
		events = append(events, Event{Type: "plan", Text: text})
	}
	st := Status{Ref: it.WebhookConfig.UserMetadata[metaRef], Follows: geminiFollows(it.WebhookConfig.UserMetadata)}
	st.Events, st.Cursor = afterCursor(events, cursor)
	if it.Status == "budget_exceeded" {
		it.Status = "failed"
	}
	switch st.State = stateOf(it.Status); {
	case st.State == Failed:
		st.Error = failure("")
		if len(it.Errors) > 0 {
			st.Error = failure(it.Errors[0].Message)
		}
	case complete && plan:
		st.State = RequiresPlan
	case complete:
		st.Result = cited(text, anns, searches)
	}
	return st, nil
}
