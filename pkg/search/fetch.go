package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/fetch"
	"github.com/searchfleet/searchfleet/pkg/intent"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/state"
	"github.com/searchfleet/searchfleet/pkg/trace"
)

// FetchWorker runs web_fetch calls in the search workers' processes: the same pool,
// the same per-call lease and stored result (a redelivery republishes what the first
// delivery fetched), and the same resume message (Done, with Page set).
type FetchWorker struct {
	Bus     *bus.Bus
	Store   Calls
	Fetcher fetch.PageFetcher
	// Ender ends direct fetch jobs (POST /v1/fetch).
	Ender *jobs.Ender
	// LeaseTTL is how long a dead worker's claim on a fetch blocks the next one.
	LeaseTTL time.Duration
	Metrics  *metrics.Metrics
	Log      *slog.Logger
	ID       string
}

// Handle runs one fetch: a stored result is republished; a job that ended gets no
// fetch; the call's lease keeps two deliveries from both fetching; the page (or why
// it could not be read) is stored, a page the server answered with is recorded
// under its FetchAddress (record.go: a replay or a repeated fetch reads it), then
// it is published for the chain.
func (w *FetchWorker) Handle(ctx context.Context, d *bus.Delivery[FetchRequest]) (err error) {
	req := d.Msg
	ctx, span := trace.Tool(ctx, intent.FetchToolName, "", req.URL, req.JobID, req.CallID)
	defer func() { trace.End(span, err) }()
	ss, err := w.Store.StartSearch(ctx, req.JobID, req.Hop, req.CallID, w.ID, w.LeaseTTL)
	if err != nil {
		return err
	}
	if ss.Done != nil {
		if done, msg, ok := storedDone(ss.Done, req.Direct); ok {
			return w.deliver(ctx, req, *done, msg)
		}
	}
	if ss.Status == "" {
		return jobs.Orphan(w.Metrics, w.Log, bus.ConsumerFetch, req.JobID)
	}
	if ss.Status.Terminal() {
		return nil
	}
	if !ss.Claimed {
		return bus.LeaseHeld(ss.Left, errors.New("fetch is being run by another worker"))
	}
	release := w.Store.KeepSearch(req.JobID, req.Hop, req.CallID, w.ID, w.LeaseTTL)
	defer func() { release(err != nil) }()

	var page *fetch.Page
	start := time.Now()
	if !req.Deadline.IsZero() && time.Now().After(req.Deadline) {
		page = &fetch.Page{URL: req.URL, Error: &fetch.Error{Type: fetch.ErrUnavailable, Message: "the job's deadline passed before the page could be fetched"}}
	} else if page, err = w.Fetcher.Fetch(ctx, req.URL); err != nil {
		return err // shutting down: another worker takes it
	}
	elapsed := time.Since(start)
	w.count(page)
	trace.Searched(ctx, FetchOutcome(page), 1, 0)
	if page.Error != nil {
		w.Log.Info("fetch: failed", "job", req.JobID, "type", page.Error.Type)
	}
	done := Done{JobID: req.JobID, Hop: req.Hop, CallID: req.CallID, Engine: FetchEngine, Result: *PageResult(page),
		Attempts: d.Attempt, Millis: elapsed.Milliseconds(), Worker: w.ID, Page: page}
	msg, err := saveDone(ctx, w.Store, w.LeaseTTL, req.Direct, &done, fetchRecording(req, &done))
	if err != nil {
		return err
	}
	return w.deliver(ctx, req, done, msg)
}

// deliver hands a finished fetch on: to its chat chain (msg is the resume message as
// saveDone stored it: a page is not encoded again), or, for a direct fetch (POST
// /v1/fetch), as the job's own ending: completed with the page, or failed with the
// fetch's error (the page kept as the response, so the client sees what was seen).
func (w *FetchWorker) deliver(ctx context.Context, req FetchRequest, done Done, msg []byte) error {
	if !req.Direct {
		return w.Bus.Publish(ctx, bus.SubjectResumeOf(req.Band, req.Tenant), bus.Sealed{Payload: done, Envelope: msg})
	}
	b, _ := json.Marshal(map[string]any{"object": "fetch.result", "id": req.JobID, "page": done.Page})
	end := jobs.Ending{Status: state.Completed, Response: b, Usage: directFetchUsage}
	if p := done.Page; p == nil || p.Error != nil {
		e := &fetch.Error{Type: fetch.ErrUnavailable, Message: "the page could not be fetched"}
		if p != nil {
			e = p.Error
		}
		end = jobs.Ending{Status: state.Failed, Error: fetchFailed(e), Response: b, Usage: directFetchUsage}
	}
	return w.Ender.End(ctx, req.JobID, end)
}

// directFetchUsage is a direct fetch's usage record, usage.searchfleet's form: one
// page read, at no cost (the fleet prices searches and model calls, not page reads).
// POST /v1/fetch's cost headers and GET /v1/jobs/{id} read it.
var directFetchUsage, _ = json.Marshal(wire.Spend{Fetches: 1})

// fetchFailed is a direct fetch's job error: a URL the fetcher may not or cannot read
// is the client's to change (400), anything else is the page's server or the way to
// it (502).
func fetchFailed(e *fetch.Error) *state.JobError {
	switch e.Type {
	case fetch.ErrInvalidURL, fetch.ErrRefused, fetch.ErrContentType:
		return &state.JobError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: e.Type, Message: e.Message}
	}
	return &state.JobError{Status: http.StatusBadGateway, Type: "fetch_error", Code: e.Type, Message: e.Message}
}

// count adds the fetch to fleet_fetch_total by outcome.
func (w *FetchWorker) count(p *fetch.Page) {
	if w.Metrics != nil {
		w.Metrics.Fetches.WithLabelValues(FetchOutcome(p)).Inc()
	}
}

// FetchOutcome is a fetch's outcome label: the error type in lower case, else the
// page's kind, "truncated" for a capped page, or "ok".
func FetchOutcome(p *fetch.Page) string {
	switch {
	case p.Error != nil:
		return strings.ToLower(p.Error.Type)
	case p.Kind == fetch.KindJSShell || p.Kind == fetch.KindEmpty:
		return p.Kind
	case p.Truncated:
		return "truncated"
	}
	return "ok"
}

// PageResult is a fetched page as a search result: one source (the page, titled)
// that the chain numbers with its search results, so the answer can cite it — unless
// the page had no readable content (js_shell, empty): then no source; or the fetch's
// error, in the words the model reads.
func PageResult(p *fetch.Page) *engines.Result {
	if e := p.Error; e != nil {
		return &engines.Result{
			Engine: FetchEngine,
			Query:  p.URL,
			Hits:   []engines.Hit{},
			Citation: engines.Citation{
				LLMContent:    fmt.Sprintf("Error: web_fetch of %q failed.\n\nDetails: %s\n\n%s", p.URL, e.Message, fetchAdvice(e.Type)),
				ReturnDisplay: "Web fetch failed.",
				Error:         &engines.CitationError{Type: e.Type, Message: e.Message},
			},
		}
	}
	u := p.FinalURL
	if u == "" {
		u = p.URL
	}
	// The page's <title> is text the parser decoded: "&lt;script&gt;" in it is a
	// <script> now. A citation title is plain text (engines.PlainText).
	title := strings.Join(strings.Fields(engines.PlainText(p.Title)), " ")
	res := &engines.Result{Engine: FetchEngine, Query: p.URL, Hits: []engines.Hit{{Title: title, URL: u}}, Citation: engines.Citation{ReturnDisplay: "Fetched 1 page."}}
	if p.Kind == fetch.KindJSShell || p.Kind == fetch.KindEmpty {
		// Nothing readable: nothing an answer could cite.
		res.Citation.ReturnDisplay = "Fetched 1 page without readable content."
		return res
	}
	res.Citation.Sources = []engines.Source{{Web: engines.Web{Title: title, URI: u}}}
	return res
}

// fetchAdvice tells the model what to do after a failed fetch.
func fetchAdvice(typ string) string {
	switch typ {
	case fetch.ErrRefused:
		return "This address may not be fetched; do not retry it. Answer from what you have."
	case fetch.ErrContentType:
		return "Only HTML, plain text and JSON pages can be read; answer from what you have or fetch another page."
	case fetch.ErrLimit:
		return "Answer with the pages you already have."
	case fetch.ErrInvalidURL:
		return "Call web_fetch again with one absolute http or https URL."
	}
	return "The page could not be read; answer from what you have and say the page was unavailable, or fetch another page."
}
