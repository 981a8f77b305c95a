// Package research runs research runs: a question becomes a plan of sub-questions,
// each sub-question an ordinary chat job on the fleet (web_search and web_fetch), and
// the children's findings a report with a checked citation on every claim.
//
// A run is fleet work, not one process's loop. Its record lives in Redis
// (state.Store.Research); its steps ride the JOBS stream on the run's lane
// (bus.SubjectResearchOf: its tenant's in band async, its batch's in band batch;
// consumer "researcher"'s lanes, in the chat workers' processes, taken by fair
// shares); each step reads the run and
// one pure function, next in phase.go, decides what to do. A child's end reaches its
// run through the finisher (Hook, a finish hook of every job), which counts it in the
// run once and publishes a step. Every write is first-write-wins or counted once, so
// a step can be redelivered to any worker, and nothing paid is paid again.
package research

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/pkg/research/agent"
)

// IDPrefix starts every research run's id.
const IDPrefix = "rr_"

// ModelPrefix is the model name prefix that makes a Responses request a research run
// ("research/sim-model": the fleet's run with sim-model as its brain).
const ModelPrefix = "research/"

// Request is a research run's request as the run keeps it.
type Request struct {
	// Input is the question (for messages, the conversation as text, the last user
	// message last).
	Input string `json:"input"`
	// Model is the model the client named; Brain the configured chat model that
	// plans, reflects and writes; Agent the provider agent that carries the run out
	// instead ("" the fleet).
	Model        string          `json:"model"`
	Brain        string          `json:"brain,omitempty"`
	Agent        string          `json:"agent,omitempty"`
	Effort       string          `json:"effort"`
	Instructions string          `json:"instructions,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// Plan is "auto" or "review" (stop at requires_action once planned).
	Plan     string            `json:"plan"`
	Budget   Budget            `json:"budget,omitzero"`
	Callback json.RawMessage   `json:"callback,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// Surface is the API that made the run ("research", "responses", "mcp",
	// "batch"): the Responses API renders a run it made as a Response.
	Surface string `json:"surface,omitempty"`
	// Batch and Line are the batch and the line's job of a run a batch line made:
	// its children run on the batch's lane, its spend counts against the batch's
	// cap, and its end ends the line's job.
	Batch string `json:"batch,omitempty"`
	Line  string `json:"line,omitempty"`
}

// Budget bounds what a run may spend. Zero fields are unbounded (the tenant's budget
// and the effort's bounds still hold).
type Budget struct {
	MaxUSD      float64   `json:"max_usd,omitempty"`
	MaxSearches int       `json:"max_searches,omitempty"`
	MaxFetches  int       `json:"max_fetches,omitempty"`
	Deadline    time.Time `json:"deadline,omitzero"`
}

// Effort is what one effort level allows a run: sub-questions in the plan (breadth),
// reflection rounds after the first and the sub-questions each may add, and the
// searches and page fetches each child may make.
type Effort struct {
	Breadth  int `json:"breadth"`
	Rounds   int `json:"rounds"`
	PerRound int `json:"per_round"`
	Searches int `json:"searches"`
	Fetches  int `json:"fetches"`
}

// Efforts are the effort levels' bounds (docs/api.md repeats them).
var Efforts = map[string]Effort{
	"low":    {Breadth: 3, Rounds: 0, PerRound: 0, Searches: 2, Fetches: 0},
	"medium": {Breadth: 6, Rounds: 1, PerRound: 3, Searches: 3, Fetches: 1},
	"high":   {Breadth: 16, Rounds: 1, PerRound: 8, Searches: 4, Fetches: 2},
	"max":    {Breadth: 24, Rounds: 2, PerRound: 8, Searches: 6, Fetches: 4},
}

// EffortOf is the effort level's bounds (medium when the level is unknown).
func EffortOf(level string) Effort {
	if e, ok := Efforts[level]; ok {
		return e
	}
	return Efforts["medium"]
}

// Limits bound what a request may carry.
const (
	maxInputChars        = 32 << 10
	maxInstructionsChars = 16 << 10
	maxSchemaBytes       = 64 << 10
	maxMetadata          = 16
	maxQuestionChars     = 500
)

// Validate checks a request as a client sent it and fills in its defaults. Its
// errors are the client's to fix (their text is client-safe).
func (r *Request) Validate() error {
	r.Input = strings.TrimSpace(r.Input)
	switch {
	case r.Input == "":
		return errors.New("input: a question is required")
	case len(r.Input) > maxInputChars:
		return fmt.Errorf("input: at most %d characters", maxInputChars)
	case len(r.Instructions) > maxInstructionsChars:
		return fmt.Errorf("instructions: at most %d characters", maxInstructionsChars)
	case len(r.OutputSchema) > maxSchemaBytes:
		return fmt.Errorf("output_schema: at most %d bytes", maxSchemaBytes)
	case len(r.Metadata) > maxMetadata:
		return fmt.Errorf("metadata: at most %d keys", maxMetadata)
	}
	if r.Effort == "" {
		r.Effort = "medium"
	}
	if _, ok := Efforts[r.Effort]; !ok {
		return errors.New(`effort: one of "low", "medium", "high", "max"`)
	}
	switch r.Plan {
	case "":
		r.Plan = "auto"
	case "auto", "review":
	default:
		return errors.New(`plan: "auto" or "review"`)
	}
	if len(r.OutputSchema) > 0 && string(r.OutputSchema) != "null" {
		var s struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(r.OutputSchema, &s); err != nil || s.Type != "object" || len(s.Properties) == 0 {
			return errors.New(`output_schema: a JSON Schema of "type": "object" with "properties"`)
		}
	} else {
		r.OutputSchema = nil
	}
	b := r.Budget
	if b.MaxUSD < 0 || math.IsNaN(b.MaxUSD) || math.IsInf(b.MaxUSD, 0) || b.MaxSearches < 0 || b.MaxFetches < 0 {
		return errors.New("budget: limits are zero (none) or positive")
	}
	return nil
}

// Plan is a run's plan: its sub-questions, each with what it must establish.
type Plan struct {
	Questions []SubQuestion `json:"questions"`
}

// SubQuestion is one sub-question of a plan or a reflection round.
type SubQuestion struct {
	Question  string `json:"question"`
	Establish string `json:"establish,omitempty"`
}

// clean bounds a list of sub-questions: blank ones and repeats dropped, each
// clipped, at most n.
func clean(qs []SubQuestion, n int) []SubQuestion {
	seen := map[string]bool{}
	var out []SubQuestion
	for _, q := range qs {
		q.Question = clip(strings.TrimSpace(q.Question), maxQuestionChars)
		q.Establish = clip(strings.TrimSpace(q.Establish), maxQuestionChars)
		k := strings.ToLower(q.Question)
		if q.Question == "" || seen[k] || len(out) >= n {
			continue
		}
		seen[k] = true
		out = append(out, q)
	}
	return out
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n]
}

// Reflection is a reflection step's verdict on a round: the gaps it names, each a
// further sub-question (none: the findings suffice).
type Reflection struct {
	Gaps []SubQuestion `json:"gaps"`
}

// Finding is what one child found, as its run keeps it (state.Run.Findings).
type Finding struct {
	Round    int      `json:"round"`
	Index    int      `json:"index"`
	Question string   `json:"question"`
	Status   string   `json:"status"`
	Text     string   `json:"text,omitempty"`
	Sources  []Source `json:"sources,omitempty"`
	Searches int      `json:"searches"`
	Fetches  int      `json:"fetches"`
	CostUSD  float64  `json:"cost_usd"`
}

// Source is one source a run cites: its number in the report, URL, title and the
// excerpt relied on. Basis is how one field of a structured output is supported.
type (
	Source = agent.Source
	Basis  = agent.Basis
)

// Output is a finished run's output: its verified draft, whose report has the
// numbered source list appended, and what verification found.
type Output struct {
	Draft
	Citations Citations `json:"citations"`
}

// Citations are what verification found: markers cited, kept as valid, removed
// (no such source, or the source does not support the claim).
type Citations struct {
	Cited   int `json:"cited"`
	Valid   int `json:"valid"`
	Removed int `json:"removed"`
}

// Draft is the writer's output before verification.
type Draft struct {
	// Report is Markdown with [n] markers into Sources.
	Report  string   `json:"report"`
	Sources []Source `json:"sources"`
	// Object is the structured answer when the request had an output_schema, Basis
	// its support per top-level field.
	Object json.RawMessage  `json:"object,omitempty"`
	Basis  map[string]Basis `json:"basis,omitempty"`
}
