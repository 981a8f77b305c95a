package console

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/searchfleet/searchfleet/pkg/batch"
	"github.com/searchfleet/searchfleet/pkg/intent"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Core is what the console's routes take from the ingress, so they authenticate,
// answer and bound their streams as every other route does.
type Core interface {
	// Tenant is the authenticated tenant of r.
	Tenant(r *http.Request) string
	// Job is the caller's job the path's {id} names; nil when it has answered r
	// (404 for another tenant's or no job, 503).
	Job(w http.ResponseWriter, r *http.Request) *state.Job
	// ListLimit reads a list's limit parameter (1..most, default def); false when it
	// has answered r with 400.
	ListLimit(w http.ResponseWriter, v string, def, most int) (int, bool)
	// ValidJobID reports whether id could be a job's id.
	ValidJobID(id string) bool
	// OpenStream takes one of the tenant's open streams for a server-sent event
	// stream and sets its deadline (FLEET_SSE_MAX_DURATION); done ends both. false
	// when it has answered r with the refusal.
	OpenStream(w http.ResponseWriter, r *http.Request, tenant string) (ctx context.Context, done func(), ok bool)
	// JSON answers with v as JSON; Error with the API's error shape; BatchError with
	// a batch.Service error's.
	JSON(w http.ResponseWriter, status int, v any)
	Error(w http.ResponseWriter, status int, typ, code, param, msg string)
	BatchError(w http.ResponseWriter, err error)
	// Question is the text of a stored request's last user turn (clipped to what a
	// job's summary shows), or "".
	Question(req json.RawMessage, clipped bool) string
	// LogFailure logs a failed store call made for a request (at INFO when the
	// client has left).
	LogFailure(ctx context.Context, msg string, args ...any)
}

// Jobs lists a tenant's jobs (state.Jobs implements it).
type Jobs interface {
	TenantJobs(ctx context.Context, tenant, after string, limit int) ([]*state.Job, bool, error)
}

// Spend reads a tenant's spend per day and model (state.Ledger implements it).
type Spend interface {
	ModelSpend(ctx context.Context, tenant string, days int, now time.Time) ([]state.ModelDaySpend, error)
}

// Batches reads a tenant's batch (batch.Service implements it).
type Batches interface {
	Get(ctx context.Context, tenant, id string) (batch.View, error)
}

// Options configure the console's routes.
type Options struct {
	Core  Core
	Jobs  Jobs
	Spend Spend
	// Batches serves GET /v1/batches/{id}/events (nil: not served).
	Batches Batches
	// Tools names the configured engines for GET /v1/engines (nil: none).
	Tools *intent.Toolset
	// Metrics are the process's metrics GET /v1/engines reads (nil: none).
	Metrics *metrics.Metrics
	Log     *slog.Logger
	// Pages serves the console's pages under /console/.
	Pages bool
}

// API is the console's routes: its pages and the read routes they are built on.
type API struct{ o Options }

// New returns the console's routes.
func New(o Options) *API { return &API{o: o} }

// Routes registers the console's routes on mux, each behind auth (the API's key
// check). The read routes are for any client; each is tenant-scoped like the rest of
// the API and bounded:
//
//	GET /v1/jobs                  the tenant's recent jobs, newest first (limit 1..100, after)
//	GET /v1/jobs/{id}/request     the request a job was submitted with, and its question
//	GET /v1/batches/{id}/events   a batch's progress as server-sent events until it ends
//	GET /v1/usage/daily           the tenant's spend per day and model (days 1..35)
//	GET /v1/engines               each engine's health: outcome shares, error rate, latency, cooldowns
//
// The console's own pages (Options.Pages) are served under /console/.
func (a *API) Routes(mux *http.ServeMux, auth func(http.HandlerFunc) http.HandlerFunc) {
	if a.o.Pages {
		mux.Handle("GET /console/", Pages())
	}
	mux.HandleFunc("GET /v1/jobs", auth(a.listJobs))
	mux.HandleFunc("GET /v1/jobs/{id}/request", auth(a.jobRequest))
	mux.HandleFunc("GET /v1/usage/daily", auth(a.dailyUsage))
	mux.HandleFunc("GET /v1/engines", auth(a.engineHealth))
	if a.o.Batches != nil {
		mux.HandleFunc("GET /v1/batches/{id}/events", auth(a.batchEvents))
	}
}

// jobSummary is a job in GET /v1/jobs: what a list shows, without the answer and the
// trace (GET /v1/jobs/{id} has them).
type jobSummary struct {
	ID         string  `json:"id"`
	Object     string  `json:"object"`
	Kind       string  `json:"kind"`
	Status     string  `json:"status"`
	Model      string  `json:"model,omitempty"`
	CreatedAt  int64   `json:"created_at"`
	FinishedAt *int64  `json:"finished_at"`
	Question   string  `json:"question,omitempty"`
	CostUSD    float64 `json:"cost_usd"`
	Searches   int     `json:"searches"`
	Error      string  `json:"error,omitempty"`
	ReplayOf   string  `json:"replay_of,omitempty"`
}

// jobList is a page of GET /v1/jobs, in the OpenAI list shape.
type jobList struct {
	Object  string       `json:"object"`
	Data    []jobSummary `json:"data"`
	FirstID *string      `json:"first_id"`
	LastID  *string      `json:"last_id"`
	HasMore bool         `json:"has_more"`
}

func (a *API) summaryOf(j *state.Job) jobSummary {
	q := j.Question
	if q == "" {
		q = a.o.Core.Question(j.Request, true) // a job recorded before questions were kept
	}
	v := jobSummary{ID: j.ID, Object: "job", Kind: j.Kind, Status: string(j.Status), Model: j.Model, CreatedAt: j.Created.Unix(),
		Question: q, ReplayOf: j.ReplayOf}
	if !j.Finished.IsZero() {
		t := j.Finished.Unix()
		v.FinishedAt = &t
	}
	var u struct {
		Searches int     `json:"searches"`
		CostUSD  float64 `json:"cost_usd"`
	}
	if json.Unmarshal(j.Usage, &u) == nil {
		v.CostUSD, v.Searches = u.CostUSD, u.Searches
	}
	if j.Error != nil {
		v.Error = j.Error.Message
	}
	return v
}

// listJobs is GET /v1/jobs: the tenant's own recent jobs (the newest
// state.TenantJobsKept it submitted; a batch's lines are under their batch), newest
// first, paged with limit (1..100, default 20) and after (a job id).
func (a *API) listJobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c := a.o.Core
	limit, ok := c.ListLimit(w, q.Get("limit"), 20, 100)
	if !ok {
		return
	}
	after := q.Get("after")
	if after != "" && !c.ValidJobID(after) {
		c.Error(w, http.StatusBadRequest, "invalid_request_error", "", "after", "after must be a job id from a previous page")
		return
	}
	js, more, err := a.o.Jobs.TenantJobs(r.Context(), c.Tenant(r), after, limit)
	if err != nil {
		c.LogFailure(r.Context(), "api: listing jobs", "err", err)
		c.Error(w, http.StatusServiceUnavailable, "server_error", "", "", "Listing jobs failed; try again.")
		return
	}
	out := make([]jobSummary, len(js))
	for i, j := range js {
		out[i] = a.summaryOf(j)
	}
	page := jobList{Object: "list", Data: out, HasMore: more}
	if len(out) > 0 {
		page.FirstID, page.LastID = &out[0].ID, &out[len(out)-1].ID
	}
	c.JSON(w, http.StatusOK, page)
}

// jobRequest is GET /v1/jobs/{id}/request: the request the tenant's job was submitted
// with (as validated and stored, in the protocol it came in), and the text of its last
// user turn as "question".
func (a *API) jobRequest(w http.ResponseWriter, r *http.Request) {
	job := a.o.Core.Job(w, r)
	if job == nil {
		return
	}
	req := job.Request
	if len(req) == 0 {
		req = json.RawMessage("null")
	}
	a.o.Core.JSON(w, http.StatusOK, map[string]any{"object": "job.request", "id": job.ID, "question": a.o.Core.Question(job.Request, false), "request": req})
}

// dailyUsage is GET /v1/usage/daily?days=N: what the tenant's jobs spent per UTC day
// (the day each ended) and model, for the last N days (1..35, default 7), newest
// first. Direct searches are counted under "(search)".
func (a *API) dailyUsage(w http.ResponseWriter, r *http.Request) {
	c := a.o.Core
	days := 7
	if v := r.URL.Query().Get("days"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > state.ModelSpendDays {
			c.Error(w, http.StatusBadRequest, "invalid_request_error", "", "days", fmt.Sprintf("days must be an integer from 1 to %d", state.ModelSpendDays))
			return
		}
		days = n
	}
	rows, err := a.o.Spend.ModelSpend(r.Context(), c.Tenant(r), days, time.Now())
	if err != nil {
		c.LogFailure(r.Context(), "api: reading spend per model", "err", err)
		c.Error(w, http.StatusServiceUnavailable, "server_error", "", "", "Reading usage failed; try again.")
		return
	}
	if rows == nil {
		rows = []state.ModelDaySpend{}
	}
	c.JSON(w, http.StatusOK, map[string]any{"object": "list", "days": days, "data": rows})
}

// batchPoll is how often a batch's progress stream reads the batch.
const batchPoll = 500 * time.Millisecond

// batchEvents is GET /v1/batches/{id}/events: the batch object as server-sent events
// ("event: batch", the same object GET /v1/batches/{id} answers), once at the start
// and again whenever its status or counts change, ending after the batch has ended
// (completed, failed, expired, cancelled). It counts as one of the tenant's open
// streams and ends at FLEET_SSE_MAX_DURATION.
func (a *API) batchEvents(w http.ResponseWriter, r *http.Request) {
	c := a.o.Core
	tenant := c.Tenant(r)
	v, err := a.o.Batches.Get(r.Context(), tenant, r.PathValue("id"))
	if err != nil {
		c.BatchError(w, err)
		return
	}
	ctx, done, ok := c.OpenStream(w, r, tenant)
	if !ok {
		return
	}
	defer done()
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(v batch.View) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: batch\ndata: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	send(v)
	last, quiet := progressOf(v), time.Now()
	tick := time.NewTicker(batchPoll)
	defer tick.Stop()
	for !batchEnded(v.Status) {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		next, err := a.o.Batches.Get(ctx, tenant, v.ID)
		if err != nil {
			if ctx.Err() == nil {
				a.o.Log.Warn("api: reading a batch for its progress stream", "batch", v.ID, "err", err)
			}
			return
		}
		v = next
		if p := progressOf(v); p != last {
			last, quiet = p, time.Now()
			send(v)
		} else if time.Since(quiet) > 15*time.Second {
			quiet = time.Now()
			fmt.Fprint(w, ": keep-alive\n\n")
			if fl != nil {
				fl.Flush()
			}
		}
	}
}

func progressOf(v batch.View) string {
	c := v.RequestCounts
	return fmt.Sprintf("%s %d %d %d", v.Status, c.Total, c.Completed, c.Failed)
}

func batchEnded(status string) bool {
	switch status {
	case "completed", "failed", "expired", "cancelled":
		return true
	}
	return false
}

// engineHealth is one engine in GET /v1/engines: rates, never counts, which would
// show every tenant what volume the others search.
type engineHealth struct {
	ID string `json:"id"`
	// Outcomes are the shares of its searches by outcome ("ok", "cached",
	// "rate_limited", "error_<kind>", …), ErrorRate the share that failed,
	// FallbackRate the share handed from it to another engine.
	Outcomes     map[string]float64 `json:"outcomes"`
	ErrorRate    float64            `json:"error_rate"`
	FallbackRate float64            `json:"fallback_rate"`
	LatencyP50   *float64           `json:"latency_p50_ms"`
	LatencyP95   *float64           `json:"latency_p95_ms"`
	// Cooldowns counts the engine's API keys put to rest, by reason.
	Cooldowns map[string]int64 `json:"cooldowns"`

	searches, errors, fallbacks float64
	outcomes                    map[string]float64
}

// engineHealth is GET /v1/engines: every configured engine's shares of searches by
// outcome, error and fallback rates, latency (p50 and p95, estimated from the
// histogram's buckets) and key cooldowns, from this ingress process's own metrics
// since it started (the whole fleet's when it runs all roles, as `make run` does). It
// holds no tenant's data: no tenant, no cost, no volume (counts are in /metrics, for
// the operator).
func (a *API) engineHealth(w http.ResponseWriter, r *http.Request) {
	byID := map[string]*engineHealth{}
	get := func(id string) *engineHealth {
		e := byID[id]
		if e == nil {
			e = &engineHealth{ID: id, Outcomes: map[string]float64{}, outcomes: map[string]float64{}, Cooldowns: map[string]int64{}}
			byID[id] = e
		}
		return e
	}
	var ids []string
	if a.o.Tools != nil {
		for _, e := range a.o.Tools.Engines() {
			get(e.ID)
			ids = append(ids, e.ID)
		}
	}
	if a.o.Metrics != nil {
		families, err := a.o.Metrics.Registry.Gather()
		if err != nil {
			a.o.Log.Warn("api: gathering metrics for engine health", "err", err)
		}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				l := labels(m)
				switch f.GetName() {
				case "fleet_searches_total":
					e := get(l["engine"])
					n := m.GetCounter().GetValue()
					e.outcomes[l["outcome"]] += n
					e.searches += n
					if strings.HasPrefix(l["outcome"], "error_") || l["outcome"] == "rate_limited" {
						e.errors += n
					}
				case "fleet_search_seconds":
					e := get(l["engine"])
					e.LatencyP50 = quantileMS(m.GetHistogram(), 0.5)
					e.LatencyP95 = quantileMS(m.GetHistogram(), 0.95)
				case "fleet_engine_key_cooldowns_total":
					get(l["engine"]).Cooldowns[l["reason"]] += int64(m.GetCounter().GetValue())
				case "fleet_search_fallbacks_total":
					get(l["from"]).fallbacks += m.GetCounter().GetValue()
				}
			}
		}
	}
	for id := range byID {
		if !slices.Contains(ids, id) && id != "" {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	share := func(n, of float64) float64 { return math.Round(n/of*1e4) / 1e4 }
	out := make([]*engineHealth, 0, len(ids))
	for _, id := range ids {
		e := byID[id]
		if e.searches > 0 {
			e.ErrorRate, e.FallbackRate = share(e.errors, e.searches), share(min(e.fallbacks, e.searches), e.searches)
			for k, n := range e.outcomes {
				e.Outcomes[k] = share(n, e.searches)
			}
		}
		out = append(out, e)
	}
	a.o.Core.JSON(w, http.StatusOK, map[string]any{"object": "list", "data": out})
}

func labels(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// quantileMS estimates quantile q of a histogram in milliseconds, interpolating
// inside the bucket it falls in (as Prometheus' histogram_quantile does); nil when
// the histogram is empty.
func quantileMS(h *dto.Histogram, q float64) *float64 {
	total := h.GetSampleCount()
	if total == 0 {
		return nil
	}
	rank := q * float64(total)
	lower, below := 0.0, 0.0
	for _, b := range h.GetBucket() {
		upper, n := b.GetUpperBound(), float64(b.GetCumulativeCount())
		if n >= rank {
			if math.IsInf(upper, 1) {
				upper = lower
			}
			v := lower
			if n > below {
				v += (upper - lower) * (rank - below) / (n - below)
			}
			ms := math.Round(v*1e4) / 10
			return &ms
		}
		lower, below = upper, n
	}
	ms := math.Round(lower*1e4) / 10
	return &ms
}

// ModelSpend is the finish hook that counts each ended job in its tenant's spend per
// day and model (GET /v1/usage/daily); it runs beside the other hooks in the ingress
// role's finisher.
type ModelSpend struct {
	Store interface {
		RecordModelSpend(ctx context.Context, job *state.Job) error
	}
}

// JobFinished counts job once.
func (m ModelSpend) JobFinished(ctx context.Context, job *state.Job) error {
	return m.Store.RecordModelSpend(ctx, job)
}
