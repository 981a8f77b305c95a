package research

import (
	"encoding/json"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// View is a run as GET /v1/research/{id} shows it (and its webhooks carry it).
type View struct {
	ID           string            `json:"id"`
	Object       string            `json:"object"`
	Status       string            `json:"status"`
	Model        string            `json:"model"`
	Effort       string            `json:"effort"`
	Input        string            `json:"input"`
	Instructions string            `json:"instructions,omitempty"`
	PlanMode     string            `json:"plan_mode"`
	CreatedAt    int64             `json:"created_at"`
	UpdatedAt    int64             `json:"updated_at"`
	CompletedAt  *int64            `json:"completed_at"`
	Plan         *Plan             `json:"plan"`
	Rounds       []RoundView       `json:"rounds"`
	Output       *Output           `json:"output"`
	Incomplete   *Incomplete       `json:"incomplete_details"`
	Error        json.RawMessage   `json:"error"`
	Usage        Usage             `json:"usage"`
	Budget       Budget            `json:"budget,omitzero"`
	Agent        string            `json:"agent,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
}

// RoundView is one round of sub-questions with its children.
type RoundView struct {
	Round     int         `json:"round"`
	Questions []ChildView `json:"questions"`
}

// ChildView is one sub-question and its child job.
type ChildView struct {
	Question  string   `json:"question"`
	Establish string   `json:"establish,omitempty"`
	JobID     string   `json:"job_id,omitempty"`
	Status    string   `json:"status"`
	Sources   []Source `json:"sources,omitempty"`
	Searches  int      `json:"searches"`
	Fetches   int      `json:"fetches"`
}

// Incomplete says why a completed run stopped short.
type Incomplete struct {
	Reason string `json:"reason"`
}

// Usage is what a run spent, by kind, and what it did.
type Usage struct {
	CostUSD     float64 `json:"cost_usd"`
	ModelUSD    float64 `json:"model_usd"`
	SearchUSD   float64 `json:"search_usd"`
	FetchUSD    float64 `json:"fetch_usd"`
	HeldUSD     float64 `json:"held_usd"`
	Searches    int     `json:"searches"`
	Fetches     int     `json:"fetches"`
	Children    int     `json:"children"`
	SubQuestion int     `json:"sub_questions"`
}

// ViewOf is a run's view.
func ViewOf(r *state.Run) View {
	var req Request
	json.Unmarshal(r.Request, &req)
	v := View{ID: r.ID, Object: "research.run", Status: r.Status, Model: req.Model, Effort: req.Effort, Input: req.Input,
		Instructions: req.Instructions, PlanMode: req.Plan, CreatedAt: r.Created.Unix(), UpdatedAt: r.Updated.Unix(),
		Rounds: []RoundView{}, Error: r.Error, Budget: req.Budget, Agent: r.Agent, Metadata: req.Metadata}
	if !r.Finished.IsZero() {
		t := r.Finished.Unix()
		v.CompletedAt = &t
	}
	if r.Plan != nil {
		var p Plan
		if json.Unmarshal(r.Plan, &p) == nil {
			v.Plan = &p
		}
	}
	if r.Result != nil {
		var o Output
		if json.Unmarshal(r.Result, &o) == nil {
			v.Output = &o
		}
	}
	if r.Incomplete != "" && r.Status == state.RunCompleted {
		v.Incomplete = &Incomplete{Reason: r.Incomplete}
	}
	if v.Error == nil {
		v.Error = json.RawMessage("null")
	}
	for n, rd := range r.Rounds {
		rv := RoundView{Round: n, Questions: []ChildView{}}
		for i, q := range questionsOf(rd.Questions) {
			c := ChildView{Question: q.Question, Establish: q.Establish, Status: "pending"}
			if rd.Submitted > i {
				c.JobID, c.Status = childID(r.ID, n, i), "running"
			}
			if st, ok := r.Ended[c.JobID]; ok && c.JobID != "" {
				c.Status = st
				var f Finding
				if json.Unmarshal(r.Findings[c.JobID], &f) == nil {
					c.Sources, c.Searches, c.Fetches = f.Sources, f.Searches, f.Fetches
				}
			}
			v.Usage.Searches += c.Searches
			v.Usage.Fetches += c.Fetches
			if c.JobID != "" {
				v.Usage.Children++
			}
			v.Usage.SubQuestion++
			rv.Questions = append(rv.Questions, c)
		}
		v.Rounds = append(v.Rounds, rv)
	}
	usd := func(n int64) float64 { return float64(n) / 1e6 }
	v.Usage.CostUSD, v.Usage.HeldUSD = usd(r.Spent), usd(r.Held)
	v.Usage.ModelUSD, v.Usage.SearchUSD, v.Usage.FetchUSD = usd(r.SpentByKind["model"]), usd(r.SpentByKind["search"]), usd(r.SpentByKind["fetch"])
	return v
}
