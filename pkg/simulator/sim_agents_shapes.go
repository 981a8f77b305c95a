package simulator

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Each simulated agent's endpoints, in its provider's documented request and answer
// shapes (see SOURCES.md, "Research agents").

// citedSpan is the span of a simulated report, in code points, that cites a page;
// each provider marks it its own way.
type citedSpan struct {
	start, end int
	hit        simHit
}

// reportText writes the report from pages: each sentence followed by link(hit),
// the cited span being the link (OpenAI) or the sentence (link == nil).
func reportText(pages []simHit, link func(simHit) string) (string, []citedSpan) {
	var b strings.Builder
	var spans []citedSpan
	for i, h := range pages[:min(3, len(pages))] {
		if i > 0 {
			b.WriteString(" ")
		}
		start := utf8.RuneCountInString(b.String())
		b.WriteString(upperFirst(h.Quote))
		if link != nil {
			start = utf8.RuneCountInString(b.String())
			b.WriteString(link(h))
		}
		spans = append(spans, citedSpan{start, utf8.RuneCountInString(b.String()), h})
	}
	return b.String(), spans
}

// structuredText writes a JSON answer for the schema's top-level fields, each from
// one page, and the span of each field's value in code points.
func structuredText(fields [][2]string, pages []simHit) (string, []citedSpan) {
	var b strings.Builder
	var spans []citedSpan
	b.WriteString("{")
	for i, f := range fields {
		if i > 0 {
			b.WriteString(", ")
		}
		h := pages[i%len(pages)]
		k, _ := json.Marshal(f[0])
		v, _ := json.Marshal(fieldValue(f[1], h, i))
		b.Write(k)
		b.WriteString(": ")
		start := utf8.RuneCountInString(b.String())
		b.Write(v)
		spans = append(spans, citedSpan{start, utf8.RuneCountInString(b.String()), h})
	}
	b.WriteString("}")
	return b.String(), spans
}

// structured is the run's answer to its schema's top-level fields, each from one of
// its pages, which cite is told of with the confidence of the field; nil when the run
// has no schema.
func (r *agentRun) structured(cite func(field string, h simHit, confidence string)) map[string]any {
	fields := schemaFields(r.schema)
	if len(fields) == 0 {
		return nil
	}
	pages := r.pages()
	obj := map[string]any{}
	for i, f := range fields {
		h := pages[i%len(pages)]
		obj[f[0]] = fieldValue(f[1], h, i)
		cite(f[0], h, []string{"high", "medium"}[i%2])
	}
	return obj
}

// answerText is the run's answer: structured when it has a schema.
func (r *agentRun) answerText(link func(simHit) string) (string, []citedSpan) {
	if f := schemaFields(r.schema); len(f) > 0 {
		return structuredText(f, r.pages())
	}
	return reportText(r.pages(), link)
}

// inProgress is a run's state as the Responses-shaped APIs name it: running is
// in_progress.
func inProgress(st string) string {
	if st == "running" {
		return "in_progress"
	}
	return st
}

func urlCitations(spans []citedSpan) []map[string]any {
	out := []map[string]any{}
	for _, s := range spans {
		out = append(out, map[string]any{"type": "url_citation", "start_index": s.start, "end_index": s.end, "url": s.hit.URL, "title": s.hit.Title})
	}
	return out
}

// agentAPIs are the simulated agents.
func agentAPIs(s *Server) []*agentAPI {
	return []*agentAPI{openAIAgent(), geminiAgent(s), perplexityAgent(), parallelAgent(), exaAgent()}
}

// --- OpenAI deep research (Responses API, background mode) -------------------------

func openAIAgent() *agentAPI {
	return &agentAPI{kind: "openai-deep-research", prefix: "resp_", runs: "/v1/responses", created: http.StatusOK,
		show: openAIResponseJSON, notFound: "No response found with id '{id}'.",
		fail: func(w http.ResponseWriter, status int, msg string) {
			agentJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": nil}})
		},
		submit: func(_ *http.Request, body []byte) (agentSubmission, int, string) {
			var req struct {
				Model      string            `json:"model"`
				Input      json.RawMessage   `json:"input"`
				Background bool              `json:"background"`
				Metadata   map[string]string `json:"metadata"`
				Tools      []struct {
					Type string `json:"type"`
				} `json:"tools"`
				Text struct {
					Format struct {
						Schema json.RawMessage `json:"schema"`
					} `json:"format"`
				} `json:"text"`
			}
			if err := json.Unmarshal(body, &req); err != nil {
				return agentSubmission{}, http.StatusBadRequest, "We could not parse the JSON body of your request."
			}
			hasSource := false
			for _, t := range req.Tools {
				hasSource = hasSource || t.Type == "web_search_preview" || t.Type == "file_search" || t.Type == "mcp"
			}
			switch {
			case !hasSource:
				return agentSubmission{}, http.StatusBadRequest, "Deep research models require at least one of 'web_search_preview', 'mcp', or 'file_search' tools."
			case !req.Background:
				return agentSubmission{}, http.StatusBadRequest, "The simulated deep research model runs in background mode only (background: true)."
			}
			question := responsesInput(req.Input)
			return agentSubmission{question: question, key: cmp.Or(req.Metadata["fleet_ref"], question), fill: func(a *agentRun) {
				a.model, a.metadata, a.schema = req.Model, req.Metadata, req.Text.Format.Schema
				a.effort = map[bool]string{true: "low", false: "medium"}[strings.HasPrefix(req.Model, "o4-mini")]
			}}, 0, ""
		}}
}

func openAIResponseJSON(r *agentRun, now time.Time) any {
	st, p := r.state(now)
	if st == "completed" && r.fixture {
		return agentFixture("openai-deep-research-completed.CONSTRUCTED.json")
	}
	status := inProgress(st)
	pages := r.pages()
	output := []any{map[string]any{"id": "rs_" + r.id[5:], "type": "reasoning", "summary": []any{
		map[string]string{"type": "summary_text", "text": "**Planning the research**\n\nI will search for " + r.ask.shown() + " and read the most relevant pages."}}}}
	k := seen(p, len(pages))
	for i, h := range pages[:k] {
		output = append(output,
			map[string]any{"id": fmt.Sprintf("ws_%s%d", r.id[5:], 2*i), "type": "web_search_call", "status": "completed", "action": map[string]any{"type": "search", "query": r.ask.shown()}},
			map[string]any{"id": fmt.Sprintf("ws_%s%d", r.id[5:], 2*i+1), "type": "web_search_call", "status": "completed", "action": map[string]any{"type": "open_page", "url": h.URL}})
	}
	if st == "completed" {
		text, spans := r.answerText(func(h simHit) string { return " ([" + h.Host + "](" + h.URL + "))" })
		output = append(output, map[string]any{"id": "msg_" + r.id[5:], "type": "message", "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": urlCitations(spans), "logprobs": []any{}}}})
	}
	// Usage whose list price is the run's cost so far.
	price := [2]float64{10, 40}
	if strings.HasPrefix(r.model, "o4-mini") {
		price = [2]float64{2, 8}
	}
	in := int(20000 * p)
	out := int(max(0, r.cost*p-float64(in)*price[0]/1e6-float64(k*2)*0.01) * 1e6 / price[1])
	var errObj any
	if st == "failed" {
		errObj = map[string]string{"code": "server_error", "message": "The simulated research failed."}
	}
	return map[string]any{
		"id": r.id, "object": "response", "created_at": r.created.Unix(), "status": status, "background": true,
		"error": errObj, "incomplete_details": nil, "model": r.model, "metadata": r.metadata,
		"output": output, "tools": []any{map[string]string{"type": "web_search_preview"}},
		"usage": map[string]any{"input_tokens": in, "output_tokens": out, "total_tokens": in + out,
			"input_tokens_details": map[string]int{"cached_tokens": 0}, "output_tokens_details": map[string]int{"reasoning_tokens": out / 2}},
	}
}

// --- Gemini Deep Research (Interactions API) ---------------------------------------

func geminiAgent(s *Server) *agentAPI {
	const kind = "gemini-deep-research"
	return &agentAPI{kind: kind, prefix: "v1_", runs: "/v1beta/interactions", created: http.StatusOK,
		show: geminiInteractionJSON, notFound: "Interaction {id} was not found.",
		// The Interactions API's error: a JSON array of one google.rpc.Status envelope.
		fail: func(w http.ResponseWriter, status int, msg string) {
			code := map[int]string{400: "INVALID_ARGUMENT", 404: "NOT_FOUND"}[status]
			agentJSON(w, status, []any{map[string]any{"error": map[string]any{"code": status, "message": msg, "status": code}}})
		},
		submit: func(_ *http.Request, body []byte) (agentSubmission, int, string) {
			var req struct {
				Input       json.RawMessage `json:"input"`
				Agent       string          `json:"agent"`
				Background  bool            `json:"background"`
				Store       *bool           `json:"store"`
				Previous    string          `json:"previous_interaction_id"`
				AgentConfig struct {
					CollaborativePlanning bool `json:"collaborative_planning"`
				} `json:"agent_config"`
				ResponseFormat struct {
					Schema json.RawMessage `json:"schema"`
				} `json:"response_format"`
				WebhookConfig struct {
					UserMetadata map[string]string `json:"user_metadata"`
				} `json:"webhook_config"`
			}
			switch err := json.Unmarshal(body, &req); {
			case err != nil:
				return agentSubmission{}, http.StatusBadRequest, "Invalid JSON payload received."
			case req.Agent == "":
				return agentSubmission{}, http.StatusBadRequest, "agent is required"
			case !req.Background:
				return agentSubmission{}, http.StatusBadRequest, "The Deep Research agent requires background=true."
			case req.Store != nil && !*req.Store:
				return agentSubmission{}, http.StatusBadRequest, "background=true requires store=true."
			}
			question, schema := responsesInput(req.Input), req.ResponseFormat.Schema
			key := cmp.Or(req.WebhookConfig.UserMetadata["fleet_ref"], question)
			if req.Previous != "" {
				prev, _ := s.agents.get(kind, req.Previous)
				if prev == nil {
					return agentSubmission{}, http.StatusNotFound, "Interaction " + req.Previous + " was not found."
				}
				// The chained interaction researches the planned question; it is
				// counted under that question, apart from the planning one.
				question, schema = prev.question, prev.schema
				key = question
			}
			return agentSubmission{question: question, key: key, fill: func(a *agentRun) {
				a.model, a.schema, a.plan, a.metadata = req.Agent, schema, req.AgentConfig.CollaborativePlanning, req.WebhookConfig.UserMetadata
				a.after = req.Previous
				a.effort = map[bool]string{true: "max", false: "medium"}[strings.Contains(req.Agent, "-max-")]
				if a.plan {
					a.running = a.queued // a plan is quick
				}
			}}, 0, ""
		}}
}

func geminiInteractionJSON(r *agentRun, now time.Time) any {
	st, p := r.state(now)
	if st == "completed" && r.fixture && !r.plan {
		return agentFixture("gemini-deep-research-completed.CONSTRUCTED.json")
	}
	status := inProgress(st)
	pages := r.pages()
	steps := []any{map[string]any{"type": "thought", "summary": []any{map[string]string{"type": "text", "text": "Breaking down " + r.ask.shown() + " into questions to search."}}}}
	if r.plan {
		if st == "completed" {
			var b strings.Builder
			for i, h := range pages[:min(3, len(pages))] {
				fmt.Fprintf(&b, "%d. Research: %s\n", i+1, h.Title)
			}
			steps = append(steps, map[string]any{"type": "model_output", "content": []any{map[string]string{"type": "text", "text": "Here is my research plan:\n" + b.String()}}})
		}
	} else {
		for i, h := range pages[:seen(p, len(pages))] {
			id := fmt.Sprintf("call_%s%d", r.id[3:], i)
			steps = append(steps,
				map[string]any{"type": "google_search_call", "id": id, "arguments": map[string]any{"queries": []string{r.ask.shown()}}, "search_type": "web_search"},
				map[string]any{"type": "google_search_result", "call_id": id, "result": []any{map[string]string{"title": h.Title, "url": h.URL}}, "is_error": false})
		}
		if st == "completed" {
			text, spans := r.answerText(nil)
			steps = append(steps, map[string]any{"type": "model_output", "content": []any{map[string]any{"type": "text", "text": text, "annotations": urlCitations(spans)}}})
		}
	}
	out := map[string]any{"id": r.id, "object": "interaction", "agent": r.model, "status": status,
		"created": r.created.UTC().Format(time.RFC3339), "updated": now.UTC().Format(time.RFC3339), "steps": steps,
		"usage": map[string]int{"total_input_tokens": int(5000 * p), "total_output_tokens": int(3000 * p), "total_thought_tokens": int(2000 * p)}}
	if st == "failed" {
		out["errors"] = []any{map[string]string{"code": "INTERNAL", "message": "The simulated research failed."}}
	}
	if r.metadata != nil {
		out["webhook_config"] = map[string]any{"user_metadata": r.metadata}
	}
	if r.after != "" {
		out["previous_interaction_id"] = r.after
	}
	return out
}

// --- Perplexity Agent API ----------------------------------------------------------

func perplexityAgent() *agentAPI {
	return &agentAPI{kind: "perplexity-agent", prefix: "resp_", runs: "/v1/agent", created: http.StatusOK,
		show: perplexityResponseJSON, notFound: "response not found",
		fail: func(w http.ResponseWriter, status int, msg string) {
			typ := "invalid_request_error"
			if status == http.StatusNotFound {
				typ = "not_found"
			}
			agentJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": status}})
		},
		// Acknowledged asynchronously: the run reads cancelled on the next poll.
		cancelled: func(run *agentRun, _ time.Time, _ bool) any {
			return map[string]string{"id": run.id, "status": "cancelling"}
		},
		submit: func(_ *http.Request, body []byte) (agentSubmission, int, string) {
			var req struct {
				Preset         string          `json:"preset"`
				Model          string          `json:"model"`
				Models         []string        `json:"models"`
				Input          json.RawMessage `json:"input"`
				Background     bool            `json:"background"`
				ResponseFormat struct {
					JSONSchema struct {
						Schema json.RawMessage `json:"schema"`
					} `json:"json_schema"`
				} `json:"response_format"`
			}
			switch err := json.Unmarshal(body, &req); {
			case err != nil:
				return agentSubmission{}, http.StatusBadRequest, "invalid JSON body"
			case req.Preset == "" && req.Model == "" && len(req.Models) == 0:
				return agentSubmission{}, http.StatusBadRequest, "one of model, models or preset is required"
			}
			question := responsesInput(req.Input)
			return agentSubmission{question: question, key: question, fill: func(a *agentRun) {
				a.effort, a.model, a.schema = req.Preset, cmp.Or(req.Model, "perplexity/sonar"), req.ResponseFormat.JSONSchema.Schema
				if !req.Background { // answered at once
					a.queued, a.running = 0, 0
				}
			}}, 0, ""
		}}
}

func perplexityResponseJSON(r *agentRun, now time.Time) any {
	st, p := r.state(now)
	if st == "completed" && r.fixture {
		return agentFixture("perplexity-agent-completed.CONSTRUCTED.json")
	}
	status := inProgress(st)
	pages := r.pages()
	k := seen(p, len(pages))
	var output []any
	if k > 0 {
		var results []any
		for i, h := range pages[:k] {
			results = append(results, map[string]any{"id": i + 1, "title": h.Title, "url": h.URL, "snippet": h.Snippet,
				"date": h.Date.Format("2006-01-02"), "last_updated": h.Date.Format("2006-01-02"), "source": "web"})
		}
		output = append(output, map[string]any{"type": "search_results", "queries": []string{r.ask.shown()}, "results": results})
	}
	if st == "completed" {
		text, spans := r.answerText(nil)
		output = append(output, map[string]any{"type": "message", "id": "msg_" + r.id[5:], "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": urlCitations(spans)}}})
	}
	cost := r.cost * p
	out := map[string]any{"id": r.id, "object": "response", "created_at": r.created.Unix(), "status": status, "model": r.model, "output": output,
		"usage": map[string]any{"input_tokens": int(1800 * p), "output_tokens": int(400 * p), "total_tokens": int(2200 * p),
			"tool_calls_details": map[string]any{"web_search": map[string]int{"invocation": k}},
			"cost":               map[string]any{"currency": "USD", "input_cost": round6(cost * 0.3), "output_cost": round6(cost * 0.2), "tool_calls_cost": round6(cost * 0.5), "total_cost": round6(cost)}}}
	if st == "failed" {
		out["error"] = map[string]string{"message": "The simulated research failed."}
	}
	return out
}

func round6(v float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', 6, 64), 64)
	return f
}

// --- Parallel Task API -------------------------------------------------------------

func parallelAgent() *agentAPI {
	api := &agentAPI{kind: "parallel-task", prefix: "trun_", runs: "/v1/tasks/runs", created: http.StatusAccepted,
		notFound: "Run {id} not found",
		fail: func(w http.ResponseWriter, status int, msg string) {
			agentJSON(w, status, map[string]any{"type": "error", "error": map[string]string{"ref_id": "sim", "message": msg}})
		},
		show: func(run *agentRun, now time.Time) any {
			st, _ := run.state(now)
			return parallelRunJSON(run, st)
		},
		cancelled: func(run *agentRun, now time.Time, going bool) any {
			st, _ := run.state(now)
			if going {
				st = "cancelling"
			}
			return parallelRunJSON(run, st)
		},
		submit: func(r *http.Request, body []byte) (agentSubmission, int, string) {
			var req struct {
				Input     json.RawMessage   `json:"input"`
				Processor string            `json:"processor"`
				Metadata  map[string]string `json:"metadata"`
				TaskSpec  struct {
					OutputSchema json.RawMessage `json:"output_schema"`
				} `json:"task_spec"`
				Webhook *struct {
					URL        string   `json:"url"`
					EventTypes []string `json:"event_types"`
				} `json:"webhook"`
			}
			if err := json.Unmarshal(body, &req); err != nil || req.Processor == "" {
				return agentSubmission{}, http.StatusUnprocessableEntity, "processor and input are required"
			}
			if req.Webhook != nil && !strings.Contains(r.Header.Get("Parallel-Beta"), "webhook-2025-08-12") {
				return agentSubmission{}, http.StatusUnprocessableEntity, "webhook requires the parallel-beta header webhook-2025-08-12"
			}
			for k, v := range req.Metadata {
				if len(k) > 16 || len(v) > 512 {
					return agentSubmission{}, http.StatusUnprocessableEntity, "metadata keys are at most 16 and values at most 512 characters"
				}
			}
			var spec struct { // a JSON output, or a text one described by a string
				Type       string          `json:"type"`
				JSONSchema json.RawMessage `json:"json_schema"`
			}
			json.Unmarshal(req.TaskSpec.OutputSchema, &spec)
			question := responsesInput(req.Input)
			return agentSubmission{question: question, key: cmp.Or(req.Metadata["fleet_ref"], question), fill: func(a *agentRun) {
				a.effort, a.model, a.metadata = req.Processor, req.Processor, req.Metadata
				if spec.Type == "json" {
					a.schema = spec.JSONSchema
				}
				if req.Webhook != nil {
					a.webhook = req.Webhook.URL
				}
			}}, 0, ""
		}}
	api.more = func(s *Server, api *agentAPI) {
		s.parallelGroupRoutes(api)
		s.mux.HandleFunc(api.path("GET", "/{id}/result"), func(w http.ResponseWriter, r *http.Request) {
			run, now := s.agentRun(w, r, api)
			if run == nil {
				return
			}
			switch st, _ := run.state(now); {
			case st != "completed":
				api.fail(w, http.StatusRequestTimeout, "Run "+run.id+" is "+st+", not completed")
			case run.fixture:
				agentJSON(w, http.StatusOK, agentFixture("parallel-task-result.CONSTRUCTED.json"))
			default:
				agentJSON(w, http.StatusOK, parallelResultJSON(run))
			}
		})
	}
	return api
}

// parallelGroupRoutes are Parallel's Task Groups: POST /v1/tasks/groups makes one
// {metadata}; POST .../{id}/runs adds runs {inputs: [<a run's body>…]} (each read
// and counted as a single run's submission), answered {status, run_ids, run_cursor,
// event_cursor}; GET .../{id}/runs streams the group's runs as task_run.state
// events {type, event_id, run}.
func (s *Server) parallelGroupRoutes(api *agentAPI) {
	base := "/" + api.kind + "/v1/tasks/groups"
	s.mux.HandleFunc("POST "+base, func(w http.ResponseWriter, r *http.Request) {
		body, ok := s.readCounted(w, r, 1<<20, api.kind, r.Method+" "+r.URL.Path)
		var req struct {
			Metadata map[string]string `json:"metadata"`
		}
		if !ok {
			return
		} else if json.Unmarshal(body, &req) != nil {
			api.fail(w, http.StatusUnprocessableEntity, "the body is not JSON")
			return
		}
		g := s.agents.newGroup(req.Metadata)
		agentJSON(w, http.StatusOK, s.agents.groupJSON(g))
	})
	s.mux.HandleFunc("POST "+base+"/{gid}/runs", func(w http.ResponseWriter, r *http.Request) {
		body, ok := s.readCounted(w, r, 1<<20, api.kind, r.Method+" "+r.URL.Path)
		if !ok {
			return
		}
		g := s.agents.group(w, r, api)
		if g == nil {
			return
		}
		var req struct {
			Inputs []json.RawMessage `json:"inputs"`
		}
		if json.Unmarshal(body, &req) != nil || len(req.Inputs) == 0 {
			api.fail(w, http.StatusUnprocessableEntity, "inputs is required")
			return
		}
		runs := s.startRuns(w, r, api, g, req.Inputs)
		if runs == nil {
			return
		}
		ids := []string{}
		for _, run := range runs {
			ids = append(ids, run.id)
		}
		out := s.agents.groupJSON(g)
		agentJSON(w, http.StatusOK, map[string]any{"status": out["status"], "run_ids": ids, "run_cursor": nil, "event_cursor": nil})
	})
	s.mux.HandleFunc("GET "+base+"/{gid}/runs", func(w http.ResponseWriter, r *http.Request) {
		s.stats.count(api.kind, nil, r.URL.Path)
		g := s.agents.group(w, r, api)
		if g == nil {
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		now := s.agents.now()
		for i, run := range s.agents.groupRuns(g) {
			if run.fixture { // on one line, an SSE data line
				var b bytes.Buffer
				json.Compact(&b, agentFixture("parallel-task-group-runs-event.CONSTRUCTED.json"))
				fmt.Fprintf(w, "event: task_run.state\ndata: %s\n\n", b.Bytes())
				continue
			}
			st, _ := run.state(now)
			fmt.Fprintf(w, "event: task_run.state\ndata: %s\n\n", mustJSON(map[string]any{"type": "task_run.state", "event_id": strconv.Itoa(i + 1), "run": parallelRunJSON(run, st)}))
		}
	})
}

// parallelRunJSON is a Task Run in status st.
func parallelRunJSON(r *agentRun, st string) map[string]any {
	var errObj any
	if st == "failed" {
		errObj = map[string]any{"ref_id": "sim-" + r.id, "message": "The simulated research failed.", "detail": nil}
	}
	return map[string]any{"run_id": r.id, "status": st, "is_active": st == "queued" || st == "running" || st == "cancelling",
		"warnings": nil, "error": errObj, "processor": r.model, "metadata": r.metadata,
		"created_at": r.created.UTC().Format(time.RFC3339Nano), "modified_at": r.created.Add(r.queued + r.running).UTC().Format(time.RFC3339Nano)}
}

func parallelResultJSON(r *agentRun) any {
	pages := r.pages()
	var content any
	var basis []any
	cite := func(h simHit) map[string]any {
		return map[string]any{"title": h.Title, "url": h.URL, "excerpts": []string{h.Quote}}
	}
	typ := "text"
	if obj := r.structured(func(field string, h simHit, confidence string) {
		basis = append(basis, map[string]any{"field": field, "citations": []any{cite(h)}, "reasoning": "The page " + h.Title + " states it.", "confidence": confidence})
	}); obj != nil {
		typ, content = "json", obj
	} else {
		text, _ := reportText(pages, func(h simHit) string { return " ([source](" + h.URL + "))" })
		var cites []any
		for _, h := range pages[:min(3, len(pages))] {
			cites = append(cites, cite(h))
		}
		content = "# " + upperFirst(r.ask.shown()) + "\n\n" + text
		basis = []any{map[string]any{"field": "output", "citations": cites, "reasoning": "Each statement quotes the page it links.", "confidence": "high"}}
	}
	return map[string]any{"run": parallelRunJSON(r, "completed"), "output": map[string]any{"type": typ, "content": content, "basis": basis}}
}

// --- Exa Agent API -----------------------------------------------------------------

func exaAgent() *agentAPI {
	api := &agentAPI{kind: "exa-agent", prefix: "agent_run_", runs: "/agent/runs", created: http.StatusOK,
		show: exaRunJSON, notFound: "Run not found",
		fail: func(w http.ResponseWriter, status int, msg string) {
			typ, code := "INVALID_REQUEST", "INVALID_REQUEST"
			if status == http.StatusNotFound {
				typ, code = "NOT_FOUND", "RUN_NOT_FOUND"
			}
			agentJSON(w, status, map[string]any{"error": map[string]string{"type": typ, "code": code, "message": msg}})
		},
		submit: func(r *http.Request, body []byte) (agentSubmission, int, string) {
			var req struct {
				Query        string            `json:"query"`
				Effort       string            `json:"effort"`
				OutputSchema json.RawMessage   `json:"outputSchema"`
				Metadata     map[string]string `json:"metadata"`
			}
			if err := json.Unmarshal(body, &req); err != nil || req.Query == "" {
				return agentSubmission{}, http.StatusBadRequest, "query is required"
			}
			if !strings.Contains(r.Header.Get("Exa-Beta"), "agent-2026-05-07") {
				return agentSubmission{}, http.StatusBadRequest, "Exa Agent requires the Exa-Beta: agent-2026-05-07 header"
			}
			return agentSubmission{question: req.Query, key: cmp.Or(req.Metadata["fleet_ref"], req.Query), fill: func(a *agentRun) {
				a.effort, a.metadata = cmp.Or(req.Effort, "auto"), req.Metadata
				if string(req.OutputSchema) != "null" {
					a.schema = req.OutputSchema
				}
			}}, 0, ""
		}}
	api.more = func(s *Server, api *agentAPI) {
		s.mux.HandleFunc(api.path("GET", ""), func(w http.ResponseWriter, r *http.Request) {
			s.stats.count(api.kind, nil, r.URL.Path)
			agentJSON(w, http.StatusOK, s.agents.exaList(r.URL.Query()))
		})
		s.mux.HandleFunc(api.path("GET", "/{id}/events"), func(w http.ResponseWriter, r *http.Request) {
			if run, now := s.agentRun(w, r, api); run != nil {
				agentJSON(w, http.StatusOK, exaEventsJSON(run, now))
			}
		})
	}
	return api
}

// exaList is a page of the team's runs, newest first (limit, cursor).
func (a *agentSim) exaList(q url.Values) any {
	limit, _ := strconv.Atoi(q.Get("limit"))
	if limit <= 0 || limit > 100 {
		limit = 20
	}
	from, _ := strconv.Atoi(q.Get("cursor"))
	a.mu.Lock()
	var mine []*agentRun
	for i := len(a.order) - 1; i >= 0; i-- {
		if a.order[i].kind == "exa-agent" {
			mine = append(mine, a.order[i])
		}
	}
	a.mu.Unlock()
	now := a.now()
	data := []any{}
	for i := from; i < len(mine) && i < from+limit; i++ {
		data = append(data, exaRunJSON(mine[i], now))
	}
	var next any
	if from+limit < len(mine) {
		next = strconv.Itoa(from + limit)
	}
	return map[string]any{"object": "list", "data": data, "hasMore": next != nil, "nextCursor": next}
}

// exaEventsJSON is the run's stored events: created, started, and how it ended.
func exaEventsJSON(run *agentRun, now time.Time) any {
	st, _ := run.state(now)
	evs := []any{map[string]any{"id": "1", "event": "agent_run.created", "data": map[string]string{"id": run.id, "status": "queued"}, "createdAt": run.created.UTC().Format(time.RFC3339Nano)}}
	if st != "queued" && !(st == "cancelled" && run.cancelled.Sub(run.created) < run.queued) {
		evs = append(evs, map[string]any{"id": "2", "event": "agent_run.started", "data": map[string]string{"id": run.id, "status": "running"}, "createdAt": run.created.Add(run.queued).UTC().Format(time.RFC3339Nano)})
	}
	if st == "completed" || st == "failed" || st == "cancelled" {
		evs = append(evs, map[string]any{"id": strconv.Itoa(len(evs) + 1), "event": "agent_run." + st, "data": map[string]string{"id": run.id, "object": "agent_run", "status": st}, "createdAt": now.UTC().Format(time.RFC3339Nano)})
	}
	return map[string]any{"object": "list", "data": evs, "hasMore": false, "nextCursor": nil}
}

func exaRunJSON(r *agentRun, now time.Time) any {
	st, p := r.state(now)
	if st == "completed" && r.fixture {
		return agentFixture("exa-agent-run-completed.CONSTRUCTED.json")
	}
	pages := r.pages()
	k := seen(p, len(pages))
	output := map[string]any{"text": "", "structured": nil, "grounding": []any{}}
	var stop, completed any
	switch st {
	case "completed":
		stop = "schema_satisfied"
		grounding := []any{}
		cite := func(h simHit) []any { return []any{map[string]string{"url": h.URL, "title": h.Title}} }
		if obj := r.structured(func(field string, h simHit, confidence string) {
			grounding = append(grounding, map[string]any{"field": "structured." + field, "citations": cite(h), "confidence": confidence})
		}); obj != nil {
			output["structured"] = obj
			output["text"] = "Structured answer for " + r.ask.shown() + "."
		} else {
			text, _ := reportText(pages, func(h simHit) string { return " ([" + h.Title + "](" + h.URL + "))" })
			output["text"] = text
			for _, h := range pages[:min(3, len(pages))] {
				grounding = append(grounding, map[string]any{"field": "text", "citations": cite(h), "confidence": "high"})
			}
		}
		output["grounding"] = grounding
		completed = r.created.Add(r.queued + r.running).UTC().Format(time.RFC3339Nano)
	case "failed":
		stop = "error"
	case "cancelled":
		stop = "cancelled"
	}
	cost := r.cost * p
	return map[string]any{"id": r.id, "object": "agent_run", "status": st, "stopReason": stop,
		"createdAt": r.created.UTC().Format(time.RFC3339Nano), "completedAt": completed,
		"request": map[string]any{"query": r.question, "effort": r.effort, "metadata": r.metadata, "outputSchema": r.schema},
		"output":  output,
		"usage":   map[string]any{"agentComputeUnits": round6(10 * p), "searches": k, "emails": 0, "phoneNumbers": 0},
		"costDollars": map[string]any{"total": round6(cost), "agentCompute": round6(cost * 0.7), "search": round6(cost * 0.3),
			"emails": 0, "phoneNumbers": 0}}
}
