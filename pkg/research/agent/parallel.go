package agent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/llm"
)

// parallel is Parallel's Task API: POST /v1/tasks/runs with a processor by effort
// (base, core, pro, ultra), the input and a task_spec (the output schema as a JSON
// output, else text), the fleet's reference in metadata and, when the fleet takes
// webhooks, a webhook for task_run.status (beta header webhook-2025-08-12); GET
// /v1/tasks/runs/{id} polls the status and, once completed, GET .../result reads the
// output and its basis (per field: citations with excerpts, reasoning, confidence);
// POST .../cancel cancels. Failed runs are not billed (Status.Unbilled); Parallel
// reports no cost, so a completed run settles at the agent's list price.
//
// The Task API documents no listing of single runs, but its Task Groups list theirs:
// the agent is a Grouper. Group makes the run's own task group (POST
// /v1/tasks/groups, the fleet's reference in its metadata), which the caller stores
// before it submits; Submit with Request.Group adds the run to it (POST
// /v1/tasks/groups/{id}/runs, one input: the same body as a single run's), and Find
// lists the group's runs (GET /v1/tasks/groups/{id}/runs, a stream of
// task_run.state events, each with the run and its metadata) for the one with the
// fleet's reference. Without a group Submit creates a single run and Find returns
// ErrNoLookup: the task_run.status webhook carries the whole run, metadata included
// (Webhook.Ref).
type parallel struct {
	*client
}

var parallelProcessors = [4]string{"base", "core", "pro", "ultra"}

const parallelWebhookBeta = "webhook-2025-08-12"

func (a *parallel) Submit(ctx context.Context, req Request) (string, error) {
	out := map[string]any{"type": "text"}
	if len(req.OutputSchema) > 0 {
		out = map[string]any{"type": "json", "json_schema": req.OutputSchema}
	}
	body := map[string]any{
		"input":     joinInstructions(req),
		"processor": cmp.Or(req.Model, a.model, byEffort(req.Effort, parallelProcessors)),
		"task_spec": map[string]any{"output_schema": out},
		"metadata":  map[string]string{metaRef: req.Ref},
	}
	var extra http.Header
	if req.Webhook != "" {
		body["webhook"] = map[string]any{"url": req.Webhook, "event_types": []string{"task_run.status"}}
		extra = http.Header{"Parallel-Beta": {parallelWebhookBeta}}
	}
	if req.Group == "" {
		return a.submit(ctx, body, extra)
	}
	var added struct {
		RunIDs []string `json:"run_ids"`
	}
	if err := a.do(ctx, "POST", parallelGroups+"/"+url.PathEscape(req.Group)+"/runs", map[string]any{"inputs": []any{body}}, extra, &added); err != nil {
		return "", err
	}
	if len(added.RunIDs) != 1 || added.RunIDs[0] == "" {
		return "", &llm.Error{Provider: a.kind, Message: "the provider answered without the run's id"}
	}
	return added.RunIDs[0], nil
}

// parallelGroups is where Parallel's task groups live.
const parallelGroups = "/v1/tasks/groups"

// Group makes the run's task group, the fleet's reference in its metadata.
func (a *parallel) Group(ctx context.Context, ref string) (string, error) {
	var out struct {
		ID string `json:"taskgroup_id"`
	}
	if err := a.do(ctx, "POST", parallelGroups, map[string]any{"metadata": map[string]string{metaRef: ref}}, nil, &out); err != nil {
		return "", err
	}
	if out.ID == "" {
		return "", &llm.Error{Provider: a.kind, Message: "the provider answered without the task group's id"}
	}
	return out.ID, nil
}

// Find lists the runs of the task group the run was submitted into and finds the
// one with the fleet's reference in its metadata; without a group, ErrNoLookup.
func (a *parallel) Find(ctx context.Context, ref, group string) (string, bool, error) {
	if group == "" {
		return "", false, ErrNoLookup
	}
	var b []byte
	if err := a.do(ctx, "GET", parallelGroups+"/"+url.PathEscape(group)+"/runs", nil, http.Header{"Accept": {"text/event-stream"}}, &b); err != nil {
		return "", false, err
	}
	var id string
	llm.ReadSSE(bytes.NewReader(b), func(_ string, data []byte) error {
		var ev struct {
			Type string      `json:"type"`
			Run  parallelRun `json:"run"`
		}
		if id == "" && json.Unmarshal(data, &ev) == nil && ev.Type == "task_run.state" && ev.Run.RunID != "" && ev.Run.Metadata[metaRef] == ref {
			id = ev.Run.RunID
		}
		return nil
	})
	return id, id != "", nil
}

// parallelRun is a Task Run.
type parallelRun struct {
	RunID    string            `json:"run_id"`
	Status   string            `json:"status"`
	Metadata map[string]string `json:"metadata"`
	Error    *runError         `json:"error"`
}

// parallelResult is a Task Run Result.
type parallelResult struct {
	Run    parallelRun `json:"run"`
	Output struct {
		Type    string          `json:"type"`
		Content json.RawMessage `json:"content"`
		Basis   []struct {
			Field     string `json:"field"`
			Citations []struct {
				Title    string   `json:"title"`
				URL      string   `json:"url"`
				Excerpts []string `json:"excerpts"`
			} `json:"citations"`
			Reasoning  string `json:"reasoning"`
			Confidence string `json:"confidence"`
		} `json:"basis"`
	} `json:"output"`
}

func (a *parallel) Poll(ctx context.Context, id, cursor string) (Status, error) {
	var run parallelRun
	if err := a.get(ctx, id, "", &run); err != nil {
		return Status{}, err
	}
	st := Status{Ref: run.Metadata[metaRef]}
	// Parallel reports no progress but the run's status: one event per change the
	// polls saw (the cursor is the last status handed out).
	if run.Status != cursor && run.Status != "" {
		st.Events = []Event{{Type: "status", Text: run.Status}}
	}
	st.Cursor = run.Status
	switch st.State = stateOf(run.Status); st.State {
	case Failed:
		st.Unbilled, st.Error = true, run.Error.failure()
	case Completed:
		var res parallelResult
		if err := a.get(ctx, id, "/result", &res); err != nil {
			return Status{}, err
		}
		st.Result = res.result()
	}
	return st, nil
}

// result normalizes a completed run's output: a JSON output keeps its object and
// gets one basis per field; a text output is the report, its basis's citations its
// sources.
func (r *parallelResult) result() *Result {
	basis := map[string]Basis{}
	var all []Source
	for _, b := range r.Output.Basis {
		bs := Basis{Citations: []Source{}, Reasoning: b.Reasoning, Confidence: b.Confidence}
		for _, c := range b.Citations {
			if c.URL != "" {
				bs.Citations = append(bs.Citations, Source{URL: c.URL, Title: c.Title, Excerpt: strings.Join(c.Excerpts, " … ")})
			}
		}
		all = append(all, bs.Citations...)
		basis[topField(b.Field)] = mergeBasis(basis[topField(b.Field)], bs)
	}
	if r.Output.Type == "json" {
		return fielded(r.Output.Content, "", basis, nil)
	}
	var text string
	json.Unmarshal(r.Output.Content, &text)
	return fielded(nil, text, nil, all)
}

// mergeBasis joins two bases of one top-level field (Parallel and Exa may attribute
// nested fields separately): citations united, the lower confidence kept.
func mergeBasis(a, b Basis) Basis {
	if a.Citations == nil {
		return b
	}
	for _, c := range b.Citations {
		if !slices.ContainsFunc(a.Citations, func(x Source) bool { return x.URL == c.URL }) {
			a.Citations = append(a.Citations, c)
		}
	}
	if a.Reasoning == "" {
		a.Reasoning = b.Reasoning
	} else if b.Reasoning != "" && b.Reasoning != a.Reasoning {
		a.Reasoning += " " + b.Reasoning
	}
	a.Confidence = lowerConfidence(a.Confidence, b.Confidence)
	return a
}
