package simulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Each simulated agent's endpoints, in its provider's documented request and answer
// shapes (see SOURCES.md, "Research agents").

// citedText is the simulated report: one sentence per page (its quote) and the
// page's span in code points, which each provider marks its own way.
type citedSpan struct {
	start, end int
	hit        simHit
}

// reportText writes the report from pages: each sentence followed by link(hit),
// the cited span being the link (OpenAI) or the sentence (link == nil).
func reportText(pages []simHit, link func(simHit) string) (string, []citedSpan) {
	var b strings.Builder
	var spans []citedSpan
	n := 0
	for i, h := range pages {
		if i == 3 {
			break
		}
		if i > 0 {
			b.WriteString(" ")
			n++
		}
		s := upperFirst(h.Quote)
		b.WriteString(s)
		start := n
		n += len([]rune(s))
		if link != nil {
			l := link(h)
			start = n
			b.WriteString(l)
			n += len([]rune(l))
		}
		spans = append(spans, citedSpan{start, n, h})
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
		start := len([]rune(b.String()))
		b.Write(v)
		spans = append(spans, citedSpan{start, len([]rune(b.String())), h})
	}
	b.WriteString("}")
	return b.String(), spans
}

// answerText is the run's answer: structured when it has a schema.
func (r *agentRun) answerText(link func(simHit) string) (string, []citedSpan) {
	if f := schemaFields(r.schema); len(f) > 0 {
		return structuredText(f, r.pages())
	}
	return reportText(r.pages(), link)
}

func urlCitations(spans []citedSpan) []map[string]any {
	out := []map[string]any{}
	for _, s := range spans {
		out = append(out, map[string]any{"type": "url_citation", "start_index": s.start, "end_index": s.end, "url": s.hit.URL, "title": s.hit.Title})
	}
	return out
}

// --- OpenAI deep research (Responses API, background mode) -------------------------

func (s *Server) openAIAgentRoutes() {
	const kind = "openai-deep-research"
	s.mux.HandleFunc("POST /"+kind+"/v1/responses", func(w http.ResponseWriter, r *http.Request) {
		body, ok := s.agentBody(w, r, kind)
		if !ok {
			return
		}
		var req struct {
			Model        string            `json:"model"`
			Input        json.RawMessage   `json:"input"`
			Background   bool              `json:"background"`
			Metadata     map[string]string `json:"metadata"`
			MaxToolCalls int               `json:"max_tool_calls"`
			Tools        []struct {
				Type string `json:"type"`
			} `json:"tools"`
			Text struct {
				Format struct {
					Schema json.RawMessage `json:"schema"`
				} `json:"format"`
			} `json:"text"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			openAIError(w, http.StatusBadRequest, "We could not parse the JSON body of your request.")
			return
		}
		question := inputText(req.Input)
		if !s.applyFaults(w, r, kind, r.URL.Path, question, nil, 0) {
			return
		}
		hasSource := false
		for _, t := range req.Tools {
			hasSource = hasSource || t.Type == "web_search_preview" || t.Type == "file_search" || t.Type == "mcp"
		}
		switch {
		case !hasSource:
			openAIError(w, http.StatusBadRequest, "Deep research models require at least one of 'web_search_preview', 'mcp', or 'file_search' tools.")
			return
		case !req.Background:
			openAIError(w, http.StatusBadRequest, "The simulated deep research model runs in background mode only (background: true).")
			return
		}
		key := req.Metadata["fleet_ref"]
		if key == "" {
			key = question
		}
		run := s.agents.newRun(kind, "resp_", key, question, func(a *agentRun) {
			a.model, a.metadata, a.schema = req.Model, req.Metadata, req.Text.Format.Schema
			a.ref = req.Metadata["fleet_ref"]
			a.effort = map[bool]string{true: "low", false: "medium"}[strings.HasPrefix(req.Model, "o4-mini")]
		})
		if s.agents.drop(w, run, key) {
			return
		}
		agentJSON(w, http.StatusOK, s.openAIResponseJSON(run, s.agents.now()))
	})
	s.mux.HandleFunc("GET /"+kind+"/v1/responses/{id}", func(w http.ResponseWriter, r *http.Request) {
		s.stats.count(kind, nil, r.URL.Path)
		run, now := s.agents.get(kind, r.PathValue("id"))
		if run == nil {
			openAIError(w, http.StatusNotFound, fmt.Sprintf("No response found with id '%s'.", r.PathValue("id")))
			return
		}
		agentJSON(w, http.StatusOK, s.openAIResponseJSON(run, now))
	})
	s.mux.HandleFunc("POST /"+kind+"/v1/responses/{id}/cancel", func(w http.ResponseWriter, r *http.Request) {
		s.stats.count(kind, nil, r.URL.Path)
		run, _ := s.agents.get(kind, r.PathValue("id"))
		if run == nil {
			openAIError(w, http.StatusNotFound, fmt.Sprintf("No response found with id '%s'.", r.PathValue("id")))
			return
		}
		s.agents.cancel(run) // cancelling a finished response answers it as it is
		agentJSON(w, http.StatusOK, s.openAIResponseJSON(run, s.agents.now()))
	})
}

func openAIError(w http.ResponseWriter, status int, msg string) {
	agentJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": nil}})
}

// inputText is the text of a Responses input: a string, or the last message's text.
func inputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var items []struct {
		Content json.RawMessage `json:"content"`
	}
	json.Unmarshal(raw, &items)
	for i := len(items) - 1; i >= 0; i-- {
		if json.Unmarshal(items[i].Content, &s) == nil {
			return s
		}
		var parts []struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(items[i].Content, &parts) == nil && len(parts) > 0 {
			return parts[0].Text
		}
	}
	return ""
}

func (s *Server) openAIResponseJSON(r *agentRun, now time.Time) any {
	st, p := r.state(now)
	if st == "completed" && r.fixture {
		return agentFixture("openai-deep-research-completed.CONSTRUCTED.json")
	}
	status := map[string]string{"running": "in_progress"}[st]
	if status == "" {
		status = st
	}
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

func (s *Server) geminiAgentRoutes() {
	const kind = "gemini-deep-research"
	s.mux.HandleFunc("POST /"+kind+"/v1beta/interactions", func(w http.ResponseWriter, r *http.Request) {
		body, ok := s.agentBody(w, r, kind)
		if !ok {
			return
		}
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
		if err := json.Unmarshal(body, &req); err != nil {
			geminiInteractionsError(w, http.StatusBadRequest, "Invalid JSON payload received.")
			return
		}
		question := inputText(req.Input)
		if !s.applyFaults(w, r, kind, r.URL.Path, question, nil, 0) {
			return
		}
		switch {
		case req.Agent == "":
			geminiInteractionsError(w, http.StatusBadRequest, "agent is required")
			return
		case !req.Background:
			geminiInteractionsError(w, http.StatusBadRequest, "The Deep Research agent requires background=true.")
			return
		case req.Store != nil && !*req.Store:
			geminiInteractionsError(w, http.StatusBadRequest, "background=true requires store=true.")
			return
		}
		schema := req.ResponseFormat.Schema
		if req.Previous != "" {
			prev, _ := s.agents.get(kind, req.Previous)
			if prev == nil {
				geminiInteractionsError(w, http.StatusNotFound, "Interaction "+req.Previous+" was not found.")
				return
			}
			// The chained interaction researches the planned question.
			question, schema = prev.question, prev.schema
		}
		key := req.WebhookConfig.UserMetadata["fleet_ref"]
		if key == "" {
			key = question
		}
		run := s.agents.newRun(kind, "v1_", key, question, func(a *agentRun) {
			a.model, a.schema, a.plan, a.metadata = req.Agent, schema, req.AgentConfig.CollaborativePlanning, req.WebhookConfig.UserMetadata
			a.effort = map[bool]string{true: "max", false: "medium"}[strings.Contains(req.Agent, "-max-")]
			if a.plan {
				a.running = a.queued // a plan is quick
			}
		})
		if s.agents.drop(w, run, key) {
			return
		}
		agentJSON(w, http.StatusOK, geminiInteractionJSON(run, s.agents.now()))
	})
	s.mux.HandleFunc("GET /"+kind+"/v1beta/interactions/{id}", func(w http.ResponseWriter, r *http.Request) {
		s.stats.count(kind, nil, r.URL.Path)
		run, now := s.agents.get(kind, r.PathValue("id"))
		if run == nil {
			geminiInteractionsError(w, http.StatusNotFound, "Interaction "+r.PathValue("id")+" was not found.")
			return
		}
		agentJSON(w, http.StatusOK, geminiInteractionJSON(run, now))
	})
	s.mux.HandleFunc("POST /"+kind+"/v1beta/interactions/{id}/cancel", func(w http.ResponseWriter, r *http.Request) {
		s.stats.count(kind, nil, r.URL.Path)
		run, _ := s.agents.get(kind, r.PathValue("id"))
		if run == nil {
			geminiInteractionsError(w, http.StatusNotFound, "Interaction "+r.PathValue("id")+" was not found.")
			return
		}
		s.agents.cancel(run)
		agentJSON(w, http.StatusOK, geminiInteractionJSON(run, s.agents.now()))
	})
}

// geminiInteractionsError is the Interactions API's error: a JSON array of one
// google.rpc.Status envelope.
func geminiInteractionsError(w http.ResponseWriter, status int, msg string) {
	code := map[int]string{400: "INVALID_ARGUMENT", 404: "NOT_FOUND"}[status]
	agentJSON(w, status, []any{map[string]any{"error": map[string]any{"code": status, "message": msg, "status": code}}})
}

func geminiInteractionJSON(r *agentRun, now time.Time) any {
	st, p := r.state(now)
	if st == "completed" && r.fixture && !r.plan {
		return agentFixture("gemini-deep-research-completed.CONSTRUCTED.json")
	}
	status := map[string]string{"running": "in_progress"}[st]
	if status == "" {
		status = st
	}
	pages := r.pages()
	steps := []any{map[string]any{"type": "thought", "summary": []any{map[string]string{"type": "text", "text": "Breaking down " + r.ask.shown() + " into questions to search."}}}}
	if r.plan {
		if st == "completed" {
			var b strings.Builder
			for i, h := range pages[:3] {
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
	return out
}

// --- Perplexity Agent API ----------------------------------------------------------

func (s *Server) perplexityAgentRoutes() {
	const kind = "perplexity-agent"
	s.mux.HandleFunc("POST /"+kind+"/v1/agent", func(w http.ResponseWriter, r *http.Request) {
		body, ok := s.agentBody(w, r, kind)
		if !ok {
			return
		}
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
		if err := json.Unmarshal(body, &req); err != nil {
			agentJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": "invalid JSON body", "type": "invalid_request_error", "code": 400}})
			return
		}
		question := inputText(req.Input)
		if !s.applyFaults(w, r, kind, r.URL.Path, question, nil, 0) {
			return
		}
		if req.Preset == "" && req.Model == "" && len(req.Models) == 0 {
			agentJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": "one of model, models or preset is required", "type": "invalid_request_error", "code": 400}})
			return
		}
		run := s.agents.newRun(kind, "resp_", question, question, func(a *agentRun) {
			a.effort, a.model, a.schema = req.Preset, req.Model, req.ResponseFormat.JSONSchema.Schema
			if a.model == "" {
				a.model = "perplexity/sonar"
			}
			if !req.Background { // answered at once
				a.queued, a.running = 0, 0
			}
		})
		if s.agents.drop(w, run, question) {
			return
		}
		agentJSON(w, http.StatusOK, perplexityResponseJSON(run, s.agents.now()))
	})
	s.mux.HandleFunc("GET /"+kind+"/v1/agent/{id}", func(w http.ResponseWriter, r *http.Request) {
		s.stats.count(kind, nil, r.URL.Path)
		run, now := s.agents.get(kind, r.PathValue("id"))
		if run == nil {
			agentJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{"message": "response not found", "type": "not_found", "code": 404}})
			return
		}
		agentJSON(w, http.StatusOK, perplexityResponseJSON(run, now))
	})
	s.mux.HandleFunc("POST /"+kind+"/v1/agent/{id}/cancel", func(w http.ResponseWriter, r *http.Request) {
		s.stats.count(kind, nil, r.URL.Path)
		run, _ := s.agents.get(kind, r.PathValue("id"))
		if run == nil {
			agentJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{"message": "response not found", "type": "not_found", "code": 404}})
			return
		}
		s.agents.cancel(run)
		// Acknowledged asynchronously: the run reads cancelled on the next poll.
		agentJSON(w, http.StatusOK, map[string]string{"id": run.id, "status": "cancelling"})
	})
}

func perplexityResponseJSON(r *agentRun, now time.Time) any {
	st, p := r.state(now)
	if st == "completed" && r.fixture {
		return agentFixture("perplexity-agent-completed.CONSTRUCTED.json")
	}
	status := map[string]string{"running": "in_progress"}[st]
	if status == "" {
		status = st
	}
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

func (s *Server) parallelAgentRoutes() {
	const kind = "parallel-task"
	notFound := func(w http.ResponseWriter, id string) {
		agentJSON(w, http.StatusNotFound, map[string]any{"type": "error", "error": map[string]string{"ref_id": "sim", "message": "Run " + id + " not found"}})
	}
	s.mux.HandleFunc("POST /"+kind+"/v1/tasks/runs", func(w http.ResponseWriter, r *http.Request) {
		body, ok := s.agentBody(w, r, kind)
		if !ok {
			return
		}
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
			agentJSON(w, http.StatusUnprocessableEntity, map[string]any{"type": "error", "error": map[string]string{"ref_id": "sim", "message": "processor and input are required"}})
			return
		}
		question := inputText(req.Input)
		if !s.applyFaults(w, r, kind, r.URL.Path, question, nil, 0) {
			return
		}
		if req.Webhook != nil && !strings.Contains(r.Header.Get("Parallel-Beta"), "webhook-2025-08-12") {
			agentJSON(w, http.StatusUnprocessableEntity, map[string]any{"type": "error", "error": map[string]string{"ref_id": "sim", "message": "webhook requires the parallel-beta header webhook-2025-08-12"}})
			return
		}
		for k, v := range req.Metadata {
			if len(k) > 16 || len(v) > 512 {
				agentJSON(w, http.StatusUnprocessableEntity, map[string]any{"type": "error", "error": map[string]string{"ref_id": "sim", "message": "metadata keys are at most 16 and values at most 512 characters"}})
				return
			}
		}
		var spec struct {
			Type       string          `json:"type"`
			JSONSchema json.RawMessage `json:"json_schema"`
		}
		json.Unmarshal(req.TaskSpec.OutputSchema, &spec)
		key := req.Metadata["fleet_ref"]
		if key == "" {
			key = question
		}
		run := s.agents.newRun(kind, "trun_", key, question, func(a *agentRun) {
			a.effort, a.model, a.metadata, a.ref = req.Processor, req.Processor, req.Metadata, req.Metadata["fleet_ref"]
			if spec.Type == "json" {
				a.schema = spec.JSONSchema
			}
			if req.Webhook != nil {
				a.webhook = req.Webhook.URL
			}
		})
		if s.agents.drop(w, run, key) {
			return
		}
		agentJSON(w, http.StatusAccepted, parallelRunJSON(run, "queued"))
	})
	s.mux.HandleFunc("GET /"+kind+"/v1/tasks/runs/{id}", func(w http.ResponseWriter, r *http.Request) {
		s.stats.count(kind, nil, r.URL.Path)
		run, now := s.agents.get(kind, r.PathValue("id"))
		if run == nil {
			notFound(w, r.PathValue("id"))
			return
		}
		st, _ := run.state(now)
		agentJSON(w, http.StatusOK, parallelRunJSON(run, st))
	})
	s.mux.HandleFunc("GET /"+kind+"/v1/tasks/runs/{id}/result", func(w http.ResponseWriter, r *http.Request) {
		s.stats.count(kind, nil, r.URL.Path)
		run, now := s.agents.get(kind, r.PathValue("id"))
		if run == nil {
			notFound(w, r.PathValue("id"))
			return
		}
		if st, _ := run.state(now); st != "completed" {
			agentJSON(w, http.StatusRequestTimeout, map[string]any{"type": "error", "error": map[string]string{"ref_id": "sim", "message": "Run " + run.id + " is " + st + ", not completed"}})
			return
		}
		if run.fixture {
			agentJSON(w, http.StatusOK, agentFixture("parallel-task-result.CONSTRUCTED.json"))
			return
		}
		agentJSON(w, http.StatusOK, parallelResultJSON(run))
	})
	s.mux.HandleFunc("POST /"+kind+"/v1/tasks/runs/{id}/cancel", func(w http.ResponseWriter, r *http.Request) {
		s.stats.count(kind, nil, r.URL.Path)
		run, now := s.agents.get(kind, r.PathValue("id"))
		if run == nil {
			notFound(w, r.PathValue("id"))
			return
		}
		st, _ := run.state(now)
		if s.agents.cancel(run) {
			st = "cancelling"
		}
		agentJSON(w, http.StatusOK, parallelRunJSON(run, st))
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
	if fields := schemaFields(r.schema); len(fields) > 0 {
		typ = "json"
		obj := map[string]any{}
		for i, f := range fields {
			h := pages[i%len(pages)]
			obj[f[0]] = fieldValue(f[1], h, i)
			basis = append(basis, map[string]any{"field": f[0], "citations": []any{cite(h)},
				"reasoning": "The page " + h.Title + " states it.", "confidence": []string{"high", "medium"}[i%2]})
		}
		content = obj
	} else {
		text, _ := reportText(pages, nil)
		var cites []any
		for i, h := range pages[:3] {
			text = strings.Replace(text, upperFirst(h.Quote), upperFirst(h.Quote)+" ([source]("+h.URL+"))", 1)
			_ = i
			cites = append(cites, cite(h))
		}
		content = "# " + upperFirst(r.ask.shown()) + "\n\n" + text
		basis = []any{map[string]any{"field": "output", "citations": cites, "reasoning": "Each statement quotes the page it links.", "confidence": "high"}}
	}
	return map[string]any{"run": parallelRunJSON(r, "completed"), "output": map[string]any{"type": typ, "content": content, "basis": basis}}
}

// --- Exa Agent API -----------------------------------------------------------------

func (s *Server) exaAgentRoutes() {
	const kind = "exa-agent"
	exaErr := func(w http.ResponseWriter, status int, typ, code, msg string) {
		agentJSON(w, status, map[string]any{"error": map[string]string{"type": typ, "code": code, "message": msg}})
	}
	s.mux.HandleFunc("POST /"+kind+"/agent/runs", func(w http.ResponseWriter, r *http.Request) {
		body, ok := s.agentBody(w, r, kind)
		if !ok {
			return
		}
		var req struct {
			Query        string            `json:"query"`
			Effort       string            `json:"effort"`
			OutputSchema json.RawMessage   `json:"outputSchema"`
			Metadata     map[string]string `json:"metadata"`
		}
		if err := json.Unmarshal(body, &req); err != nil || req.Query == "" {
			exaErr(w, http.StatusBadRequest, "INVALID_REQUEST", "INVALID_REQUEST", "query is required")
			return
		}
		if !s.applyFaults(w, r, kind, r.URL.Path, req.Query, nil, 0) {
			return
		}
		if !strings.Contains(r.Header.Get("Exa-Beta"), "agent-2026-05-07") {
			exaErr(w, http.StatusBadRequest, "INVALID_REQUEST", "INVALID_REQUEST", "Exa Agent requires the Exa-Beta: agent-2026-05-07 header")
			return
		}
		key := req.Metadata["fleet_ref"]
		if key == "" {
			key = req.Query
		}
		run := s.agents.newRun(kind, "agent_run_", key, req.Query, func(a *agentRun) {
			a.effort, a.metadata, a.ref = req.Effort, req.Metadata, req.Metadata["fleet_ref"]
			if a.effort == "" {
				a.effort = "auto"
			}
			if string(req.OutputSchema) != "null" {
				a.schema = req.OutputSchema
			}
		})
		if s.agents.drop(w, run, key) {
			return
		}
		agentJSON(w, http.StatusOK, exaRunJSON(run, s.agents.now()))
	})
	s.mux.HandleFunc("GET /"+kind+"/agent/runs", func(w http.ResponseWriter, r *http.Request) {
		s.stats.count(kind, nil, r.URL.Path)
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		if limit <= 0 || limit > 100 {
			limit = 20
		}
		from, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
		s.agents.mu.Lock()
		var mine []*agentRun
		for i := len(s.agents.order) - 1; i >= 0; i-- { // newest first
			if s.agents.order[i].kind == kind {
				mine = append(mine, s.agents.order[i])
			}
		}
		s.agents.mu.Unlock()
		now := s.agents.now()
		data := []any{}
		for i := from; i < len(mine) && i < from+limit; i++ {
			data = append(data, exaRunJSON(mine[i], now))
		}
		var next any
		if from+limit < len(mine) {
			next = strconv.Itoa(from + limit)
		}
		agentJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "hasMore": next != nil, "nextCursor": next})
	})
	s.mux.HandleFunc("GET /"+kind+"/agent/runs/{id}", func(w http.ResponseWriter, r *http.Request) {
		s.stats.count(kind, nil, r.URL.Path)
		run, now := s.agents.get(kind, r.PathValue("id"))
		if run == nil {
			exaErr(w, http.StatusNotFound, "NOT_FOUND", "RUN_NOT_FOUND", "Run not found")
			return
		}
		agentJSON(w, http.StatusOK, exaRunJSON(run, now))
	})
	s.mux.HandleFunc("GET /"+kind+"/agent/runs/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		s.stats.count(kind, nil, r.URL.Path)
		run, now := s.agents.get(kind, r.PathValue("id"))
		if run == nil {
			exaErr(w, http.StatusNotFound, "NOT_FOUND", "RUN_NOT_FOUND", "Run not found")
			return
		}
		st, _ := run.state(now)
		evs := []any{map[string]any{"id": "1", "event": "agent_run.created", "data": map[string]string{"id": run.id, "status": "queued"}, "createdAt": run.created.UTC().Format(time.RFC3339Nano)}}
		if st != "queued" && !(st == "cancelled" && run.cancelled.Sub(run.created) < run.queued) {
			evs = append(evs, map[string]any{"id": "2", "event": "agent_run.started", "data": map[string]string{"id": run.id, "status": "running"}, "createdAt": run.created.Add(run.queued).UTC().Format(time.RFC3339Nano)})
		}
		if st == "completed" || st == "failed" || st == "cancelled" {
			evs = append(evs, map[string]any{"id": strconv.Itoa(len(evs) + 1), "event": "agent_run." + st, "data": map[string]string{"id": run.id, "object": "agent_run", "status": st}, "createdAt": now.UTC().Format(time.RFC3339Nano)})
		}
		agentJSON(w, http.StatusOK, map[string]any{"object": "list", "data": evs, "hasMore": false, "nextCursor": nil})
	})
	s.mux.HandleFunc("POST /"+kind+"/agent/runs/{id}/cancel", func(w http.ResponseWriter, r *http.Request) {
		s.stats.count(kind, nil, r.URL.Path)
		run, _ := s.agents.get(kind, r.PathValue("id"))
		if run == nil {
			exaErr(w, http.StatusNotFound, "NOT_FOUND", "RUN_NOT_FOUND", "Run not found")
			return
		}
		s.agents.cancel(run)
		agentJSON(w, http.StatusOK, exaRunJSON(run, s.agents.now()))
	})
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
		if fields := schemaFields(r.schema); len(fields) > 0 {
			obj := map[string]any{}
			for i, f := range fields {
				h := pages[i%len(pages)]
				obj[f[0]] = fieldValue(f[1], h, i)
				grounding = append(grounding, map[string]any{"field": "structured." + f[0], "citations": cite(h), "confidence": []string{"high", "medium"}[i%2]})
			}
			output["structured"] = obj
			output["text"] = "Structured answer for " + r.ask.shown() + "."
		} else {
			text, _ := reportText(pages, func(h simHit) string { return " ([" + h.Title + "](" + h.URL + "))" })
			output["text"] = text
			for _, h := range pages[:3] {
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
