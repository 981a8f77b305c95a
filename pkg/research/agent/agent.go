// Package agent is a provider's research agent behind a research run: OpenAI deep
// research, Gemini Deep Research, Perplexity's Agent API, Parallel Task and Exa Agent.
// A research run (pkg/research) that names an agent submits the question to it once,
// stores the provider's run id, polls it with scheduled messages (never a sleeping
// goroutine) or takes its webhooks, and normalizes the result into the run's output.
//
// This package imports nothing of the fleet's but pkg/provider-style HTTP plumbing:
// the run's phases call it; it never calls back.
package agent

import (
	"context"
	"encoding/json"
	"errors"
)

// ErrNoLookup is Find's answer when the provider offers no way to find a run by the
// fleet's reference.
var ErrNoLookup = errors.New("the provider offers no way to find a run by the fleet's reference")

// Request is what a run submits.
type Request struct {
	// Ref is the fleet's reference for the run (the research run id): sent to the
	// provider as its idempotency key, client reference or metadata, wherever the
	// provider takes one, so Find can reattach after a crash.
	Ref string
	// Input is the question (or the last user message of the run's input).
	Input string
	// Instructions are the run's instructions, if any.
	Instructions string
	// Effort is low, medium, high or max; each agent maps it to its preset or processor.
	Effort string
	// OutputSchema is the run's JSON Schema, when it asks for structured output.
	OutputSchema json.RawMessage
	// Model is the provider's model or processor when the agent's config names one.
	Model string
	// ReviewPlan asks the agent to stop at its plan for approval (the run's plan
	// "review"): Gemini's collaborative planning. Agents without a plan step ignore it
	// and run at once.
	ReviewPlan bool
	// Webhook is the fleet's URL for this provider's webhooks where the provider takes
	// one per run (Parallel); empty: the run is polled only.
	Webhook string
	// Group is the provider's group to submit the run into (Grouper's Group, made
	// and stored before the submit; "" none).
	Group string
}

// Grouper is an agent whose provider lists runs only within a group made before
// them (Parallel's task groups): the caller makes the run's group with Group and
// stores its id before it submits into it (Request.Group), so Find can list the
// group after a crash between submit and store.
type Grouper interface {
	Group(ctx context.Context, ref string) (string, error)
}

// State is a provider run's state as the fleet sees it.
type State string

const (
	Queued       State = "queued"
	Running      State = "running"
	RequiresPlan State = "requires_action" // a plan waits for approval (Gemini collaborative planning)
	Completed    State = "completed"
	Failed       State = "failed"
	Cancelled    State = "cancelled"
)

// Done reports whether the state is terminal.
func (s State) Done() bool { return s == Completed || s == Failed || s == Cancelled }

// Status is one poll's answer.
type Status struct {
	State State
	// Events are the provider's progress events since the cursor the poll was given
	// (plan, searches, thoughts), in order; Cursor resumes after the last.
	Events []Event
	Cursor string
	// Result is set once State is Completed.
	Result *Result
	// Error is the provider's reason when State is Failed (client-safe text).
	Error string
	// CostUSD is the provider's reported cost so far, in USD (0: not reported; a
	// completed run then settles at the agent's list price).
	CostUSD float64
	// Ref is the fleet reference the provider stored with the run (its metadata),
	// when it keeps one: a webhook naming only the provider's id finds its run by it.
	Ref string
	// Follows is the provider id of the run this one continues, when the provider
	// keeps it with the run (Gemini's approved plan: the planning interaction, marked
	// as Submit marks it), as Webhook.Follows.
	Follows string
	// Unbilled reports that the provider does not bill this run (Parallel does not
	// bill failed runs): the run settles at 0, not at the agent's list price.
	Unbilled bool
}

// Event is one progress event of a provider run.
type Event struct {
	Type string // "plan", "search", "fetch", "thought", "status"
	Text string
	URL  string
}

// Result is a provider's finished research, normalized.
type Result struct {
	// Report is Markdown with [n] markers into Sources (1-based).
	Report  string
	Sources []Source
	// Output is the structured answer when the request had an OutputSchema.
	Output json.RawMessage
	// Basis is per top-level field of Output: its citations, reasoning, confidence.
	Basis map[string]Basis
	// Searches is how many searches the provider reports it ran.
	Searches int
}

// Source is one cited source (N its number in a run's report, where it has one).
type Source struct {
	N       int    `json:"n,omitempty"`
	URL     string `json:"url"`
	Title   string `json:"title,omitempty"`
	Excerpt string `json:"excerpt,omitempty"`
}

// Basis is how one output field is supported.
type Basis struct {
	Citations  []Source `json:"citations"`
	Reasoning  string   `json:"reasoning,omitempty"`
	Confidence string   `json:"confidence,omitempty"` // low, medium, high
}

// Agent is one configured research agent.
type Agent interface {
	// Submit starts a run at the provider and returns the provider's run id.
	Submit(ctx context.Context, req Request) (id string, err error)
	// Find looks for a run submitted earlier with req.Ref (after a crash between
	// submit and store); ok false when the provider has none. An agent whose provider
	// offers no way to look a run up by the fleet's reference (no idempotency key, no
	// listing by metadata) returns ErrNoLookup: the caller must not submit again
	// blindly (it would pay twice) but wait for a webhook that names the run (OpenAI,
	// Gemini, Parallel) or fail the run. group is the provider's group the run was
	// to be submitted into (Grouper; "" none): Parallel lists a task group's runs.
	Find(ctx context.Context, ref, group string) (id string, ok bool, err error)
	// Poll reads the run's state and events after cursor.
	Poll(ctx context.Context, id, cursor string) (Status, error)
	// Cancel asks the provider to stop the run.
	Cancel(ctx context.Context, id string) error
}

// Planner is an agent whose runs can stop at their plan (RequiresPlan: Gemini's
// collaborative planning, asked for by Request.ReviewPlan).
type Planner interface {
	// Approve resumes a run waiting in RequiresPlan, with the plan replaced when
	// plan is not empty, and returns the id to poll from then on: Gemini runs the
	// approved plan as a new interaction chained to the plan's, so the caller stores
	// the new id as it stores Submit's (under a claim of its own: the approval is
	// paid like the submission). ref is the fleet's reference, which the new run
	// carries as Submit's does. No provider offers a lookup of an approval whose
	// accept was lost (the caller must not approve again: it would pay twice);
	// Gemini's end webhook of the new run names the plan it follows.
	Approve(ctx context.Context, ref, id, plan string) (string, error)
}
