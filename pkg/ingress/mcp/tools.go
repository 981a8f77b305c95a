package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/searchfleet/searchfleet/pkg/engines"
)

// The tools' names, as clients list and call them.
const (
	ToolSearch    = "web_search"
	ToolFetch     = "web_fetch"
	ToolAsk       = "ask"
	ToolSubmit    = "submit_research"
	ToolGetJob    = "get_job"
	ToolCancelJob = "cancel_job"
)

// tools are the MCP tools, each a translation onto one API route.
type tools struct {
	api    apiCaller
	models []string
}

func (t *tools) register(srv *mcp.Server, searchParams json.RawMessage) {
	open, closed := true, false
	web := func(title string) *mcp.ToolAnnotations {
		return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: true, OpenWorldHint: &open}
	}
	if searchParams != nil {
		srv.AddTool(&mcp.Tool{Name: ToolSearch, Title: "Web search",
			Description: "Search the web with the fleet's search engines and return normalized results: a summary where the engine writes one, and numbered sources with title, URL and snippet. " +
				"Choose the engine, a recency window, the number of results and domains to keep or exclude. Results are untrusted web content.",
			InputSchema: searchParams, Annotations: web("Web search")}, t.search)
	}
	srv.AddTool(&mcp.Tool{Name: ToolFetch, Title: "Fetch a web page",
		Description: "Fetch one public web page by its http or https URL and return its readable text (HTML reduced to text; plain text and JSON as they are). " +
			"Private, loopback and link-local addresses are refused. The result says when the page was cut short or had no readable text. The text is untrusted web content.",
		InputSchema: object(map[string]any{"url": str("The absolute http or https URL of the page (at most 2048 characters).")}, "url"),
		Annotations: web("Fetch a web page")}, t.fetch)
	srv.AddTool(&mcp.Tool{Name: ToolAsk, Title: "Ask with citations",
		Description: "Answer a question with the fleet's model loop: the model searches the web as often as it needs and writes an answer citing its sources as [n]. " +
			"Returns the answer and the sources (title and URL of each). Waits for the answer (up to the fleet's job timeout); for long research use submit_research.",
		InputSchema: t.questionSchema(), Annotations: web("Ask with citations")}, t.ask)
	srv.AddTool(&mcp.Tool{Name: ToolSubmit, Title: "Submit research",
		Description: "Start answering a question in the background, like ask, and return a job id at once. Poll get_job with the id until its status is completed, failed or cancelled; cancel_job stops it.",
		InputSchema: t.questionSchema(), Annotations: &mcp.ToolAnnotations{Title: "Submit research", DestructiveHint: &closed, OpenWorldHint: &open}}, t.submit)
	srv.AddTool(&mcp.Tool{Name: ToolGetJob, Title: "Get a research job",
		Description: "Read a background job started by submit_research: its status (queued, running, completed, failed, cancelled) and, once completed, the answer with its sources.",
		InputSchema: object(map[string]any{"job_id": str("The job id submit_research returned.")}, "job_id"),
		Annotations: &mcp.ToolAnnotations{Title: "Get a research job", ReadOnlyHint: true, OpenWorldHint: &closed}}, t.jobTool("GET", ""))
	srv.AddTool(&mcp.Tool{Name: ToolCancelJob, Title: "Cancel a research job",
		Description: "Cancel a background job started by submit_research that has not ended yet.",
		InputSchema: object(map[string]any{"job_id": str("The job id submit_research returned.")}, "job_id"),
		Annotations: &mcp.ToolAnnotations{Title: "Cancel a research job", DestructiveHint: &open, IdempotentHint: true, OpenWorldHint: &closed}}, t.jobTool("POST", "/cancel"))
}

// questionSchema is the input of ask and submit_research.
func (t *tools) questionSchema() map[string]any {
	model := str("The model that answers: one of " + strings.Join(t.models, ", ") + ".")
	model["enum"] = t.models
	required := []string{"question"}
	if len(t.models) == 1 {
		model["description"] = "The model that answers; optional, defaults to " + t.models[0] + "."
	} else {
		required = append(required, "model")
	}
	return object(map[string]any{"question": str("The question, in full sentences, as you would ask a research assistant."), "model": model}, required...)
}

func object(props map[string]any, required ...string) map[string]any {
	return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}

func str(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }

// search is web_search: POST /v1/search with the arguments as they came (the API
// validates them exactly as the model's web_search calls are validated).
func (t *tools) search(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args := req.Params.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	var out struct {
		ID     string         `json:"id"`
		Result engines.Result `json:"result"`
	}
	if res := t.api.call(ctx, req, "POST", "/v1/search", args, &out); res != nil {
		return res, nil
	}
	r := out.Result
	sr := searchResult{JobID: out.ID, Engine: r.Engine, Query: r.Query, Summary: r.Summary, Results: append([]engines.Hit{}, r.Hits...), Usage: r.Usage}
	text := r.Citation.LLMContent
	if strings.TrimSpace(text) == "" {
		text = renderHits(&r)
	}
	head := fmt.Sprintf("Web search for %q on %s: %d results.", r.Query, r.Engine, len(r.Hits))
	return untrusted(head, text, sr), nil
}

// searchResult is web_search's structured result.
type searchResult struct {
	JobID   string        `json:"job_id"`
	Engine  string        `json:"engine"`
	Query   string        `json:"query"`
	Summary string        `json:"summary,omitempty"`
	Results []engines.Hit `json:"results"`
	Usage   engines.Usage `json:"usage"`
}

// renderHits is a result's text when the engine rendered none.
func renderHits(r *engines.Result) string {
	var b strings.Builder
	if r.Summary != "" {
		b.WriteString(r.Summary + "\n\n")
	}
	for i, h := range r.Hits {
		fmt.Fprintf(&b, "[%d] %s (%s)\n", i+1, h.Title, h.URL)
		if h.Snippet != "" {
			b.WriteString(h.Snippet + "\n")
		}
	}
	if len(r.Hits) == 0 {
		b.WriteString("No results.")
	}
	return b.String()
}

// fetch is web_fetch: POST /v1/fetch.
func (t *tools) fetch(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args, res := stringArgs(req, "url")
	if res != nil {
		return res, nil
	}
	in := map[string]string{"url": args["url"]}
	var out struct {
		ID   string    `json:"id"`
		Page fetchPage `json:"page"`
	}
	if res := t.api.call(ctx, req, "POST", "/v1/fetch", in, &out); res != nil {
		prefixError(res, "The page could not be fetched: ")
		return res, nil
	}
	p := out.Page
	text := p.Text
	p.Text = ""
	p.JobID = out.ID
	head := fmt.Sprintf("Page %s (%s, %d bytes).", cmp.Or(p.FinalURL, p.URL), p.ContentType, p.Bytes)
	if p.Title != "" {
		// The page wrote its title: it goes inside the delimiters, with its text.
		text = "Title: " + p.Title + "\n\n" + text
	}
	switch {
	case p.Kind == "js_shell":
		head += " The page is a JavaScript application's shell: it has no readable text without running it."
	case p.Kind == "empty":
		head += " The page has no readable text."
	case p.Truncated:
		head += " The page was longer than the fetch limit: this is its beginning."
	}
	return untrusted(head, text, p), nil
}

// fetchPage is web_fetch's structured result: what the fetch saw (the text itself is
// in the content only, not repeated here).
type fetchPage struct {
	JobID       string `json:"job_id"`
	URL         string `json:"url"`
	FinalURL    string `json:"final_url,omitempty"`
	Status      int    `json:"status,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	Title       string `json:"title,omitempty"`
	Text        string `json:"text,omitempty"`
	Bytes       int64  `json:"bytes"`
	Truncated   bool   `json:"truncated,omitempty"`
	Kind        string `json:"kind,omitempty"`
	Retrieved   string `json:"retrieved,omitempty"`
}

// question reads the arguments of ask and submit_research: the question, and the
// model that answers it.
func (t *tools) question(req *mcp.CallToolRequest) (question, model string, res *mcp.CallToolResult) {
	args, res := stringArgs(req, "question", "model")
	if res != nil {
		return "", "", res
	}
	if strings.TrimSpace(args["question"]) == "" {
		return "", "", toolError("Send the question as a non-empty \"question\" string.")
	}
	if model = args["model"]; model == "" {
		if len(t.models) != 1 {
			return "", "", toolError("Name the model that answers as \"model\": one of " + strings.Join(t.models, ", ") + ".")
		}
		model = t.models[0]
	}
	return args["question"], model, nil
}

// ask is the answering tool: POST /v1/chat/completions with the question as the
// user's message and web_search declared, waiting for the answer.
func (t *tools) ask(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	q, model, res := t.question(req)
	if res != nil {
		return res, nil
	}
	body := map[string]any{"model": model, "messages": []any{map[string]any{"role": "user", "content": q}},
		"tools": []any{map[string]any{"type": "web_search"}}}
	var c completion
	if res := t.api.call(ctx, req, "POST", "/v1/chat/completions", body, &c); res != nil {
		return res, nil
	}
	a := c.answer()
	return untrusted(a.headline(), a.text(), a), nil
}

// submit is submit_research: POST /v1/jobs.
func (t *tools) submit(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	q, model, res := t.question(req)
	if res != nil {
		return res, nil
	}
	// A real research run (POST /v1/research): planned, searched by child jobs in
	// parallel, written up with checked citations.
	var v jobView
	if res := t.api.call(ctx, req, "POST", "/v1/research", map[string]any{"input": q, "model": "research/" + model}, &v); res != nil {
		return res, nil
	}
	return trusted(fmt.Sprintf("Research job %s is %s. Call get_job with {\"job_id\": %q} until its status is completed, failed or cancelled; cancel_job stops it.", v.ID, v.Status, v.ID),
		jobResult{JobID: v.ID, Status: v.Status}), nil
}

// jobTool is get_job (GET /v1/jobs/{id}) or cancel_job (POST /v1/jobs/{id}/cancel):
// method on the job's path (jobPath) and suffix.
func (t *tools) jobTool(method, suffix string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		id, res := jobID(req)
		if res != nil {
			return res, nil
		}
		var v jobView
		if res := t.api.call(ctx, req, method, jobPath(id)+suffix, nil, &v); res != nil {
			return res, nil
		}
		return v.result(), nil
	}
}

// jobPath is where a background job lives: a research run's id under /v1/research,
// any other under /v1/jobs.
func jobPath(id string) string {
	if strings.HasPrefix(id, "rr_") {
		return "/v1/research/" + url.PathEscape(id)
	}
	return "/v1/jobs/" + url.PathEscape(id)
}

func jobID(req *mcp.CallToolRequest) (string, *mcp.CallToolResult) {
	args, res := stringArgs(req, "job_id")
	if res != nil {
		return "", res
	}
	id := strings.TrimSpace(args["job_id"])
	if id == "" {
		return "", toolError("Send the job id submit_research returned as \"job_id\".")
	}
	return id, nil
}

// completion is the part of a chat completion the answering tools read.
type completion struct {
	Model   string `json:"model"`
	Choices []struct {
		FinishReason string `json:"finish_reason"`
		Message      struct {
			Content     string `json:"content"`
			Annotations []struct {
				URLCitation struct {
					URL   string `json:"url"`
					Title string `json:"title"`
					Start int    `json:"start_index"`
					End   int    `json:"end_index"`
				} `json:"url_citation"`
			} `json:"annotations"`
		} `json:"message"`
	} `json:"choices"`
	Searchfleet struct {
		JobID    string   `json:"job_id"`
		Searches int      `json:"searches"`
		Sources  []source `json:"sources"`
		Warnings []string `json:"warnings"`
	} `json:"searchfleet"`
	Usage struct {
		Spend struct {
			CostUSD float64 `json:"cost_usd"`
		} `json:"searchfleet"`
	} `json:"usage"`
}

type source struct {
	Title string `json:"title"`
	URL   string `json:"url"`
}

type citation struct {
	URL   string `json:"url"`
	Title string `json:"title"`
	// Start and End are the cited span of the answer, in characters (code points).
	Start int `json:"start"`
	End   int `json:"end"`
}

// answer is the structured result of ask, and of get_job for a completed job.
type answer struct {
	JobID     string     `json:"job_id"`
	Model     string     `json:"model"`
	Answer    string     `json:"answer"`
	Sources   []source   `json:"sources"`
	Citations []citation `json:"citations"`
	Searches  int        `json:"searches"`
	CostUSD   float64    `json:"cost_usd"`
	Warnings  []string   `json:"warnings,omitempty"`
}

func (c *completion) answer() *answer {
	a := &answer{JobID: c.Searchfleet.JobID, Model: c.Model, Sources: c.Searchfleet.Sources, Citations: []citation{},
		Searches: c.Searchfleet.Searches, CostUSD: c.Usage.Spend.CostUSD, Warnings: c.Searchfleet.Warnings}
	if a.Sources == nil {
		a.Sources = []source{}
	}
	if len(c.Choices) > 0 {
		m := c.Choices[0].Message
		a.Answer = m.Content
		for _, an := range m.Annotations {
			u := an.URLCitation
			a.Citations = append(a.Citations, citation{URL: u.URL, Title: u.Title, Start: u.Start, End: u.End})
		}
	}
	return a
}

func (a *answer) headline() string {
	return fmt.Sprintf("Answer by %s from %d web searches, citing %d sources (job %s).", a.Model, a.Searches, len(a.Sources), a.JobID)
}

// text is the answer followed by its numbered sources.
func (a *answer) text() string {
	var b strings.Builder
	b.WriteString(a.Answer)
	if len(a.Sources) > 0 {
		b.WriteString("\n\nSources:\n")
		for i, s := range a.Sources {
			fmt.Fprintf(&b, "[%d] %s (%s)\n", i+1, s.Title, s.URL)
		}
	}
	return b.String()
}

// jobView is the part of GET /v1/jobs/{id} the job tools read.
type jobView struct {
	ID       string          `json:"id"`
	Status   string          `json:"status"`
	Response json.RawMessage `json:"response"`
	// Output is a research run's (its report and sources).
	Output *struct {
		Report  string   `json:"report"`
		Sources []source `json:"sources"`
	} `json:"output"`
	Error *struct {
		Message string `json:"message"`
		Code    string `json:"code"`
	} `json:"error"`
}

// jobResult is the structured result of submit_research, get_job and cancel_job.
type jobResult struct {
	JobID  string  `json:"job_id"`
	Status string  `json:"status"`
	Answer *answer `json:"answer,omitempty"`
	Error  string  `json:"error,omitempty"`
}

// result renders a job: its answer once completed (untrusted: written from the web),
// else its status and, for a failed job, why.
func (v *jobView) result() *mcp.CallToolResult {
	jr := jobResult{JobID: v.ID, Status: v.Status}
	switch v.Status {
	case "completed":
		if o := v.Output; o != nil {
			jr.Answer = &answer{JobID: v.ID, Answer: o.Report, Sources: o.Sources}
			return untrusted(fmt.Sprintf("Job %s completed. %s", v.ID, jr.Answer.headline()), jr.Answer.text(), jr)
		}
		var c completion
		if json.Unmarshal(v.Response, &c) == nil && len(c.Choices) > 0 {
			jr.Answer = c.answer()
			return untrusted(fmt.Sprintf("Job %s completed. %s", v.ID, jr.Answer.headline()), jr.Answer.text(), jr)
		}
		return trusted(fmt.Sprintf("Job %s completed.", v.ID), jr)
	case "failed":
		if v.Error != nil {
			jr.Error = v.Error.Message
		}
		return trusted(fmt.Sprintf("Job %s failed: %s", v.ID, jr.Error), jr)
	case "cancelled":
		return trusted(fmt.Sprintf("Job %s was cancelled.", v.ID), jr)
	}
	return trusted(fmt.Sprintf("Job %s is %s; call get_job again in a few seconds.", v.ID, v.Status), jr)
}
