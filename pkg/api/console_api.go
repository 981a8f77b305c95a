package api

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/batch"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// The read routes the web console (internal/console) is built on; any client may use
// them. Each is tenant-scoped like the rest of the API and bounded:
//
//	GET /v1/jobs                  the tenant's recent jobs, newest first (limit 1..100, after)
//	GET /v1/jobs/{id}/request     the request a job was submitted with, and its question
//	GET /v1/batches/{id}/events   a batch's progress as server-sent events until it ends
//	GET /v1/usage/daily           the tenant's spend per day and model (days 1..35)
//	GET /v1/engines               each engine's health: searches, errors, latency, cooldowns
//
// The console's own pages (Server.Console) are served under /console/.
func (s *Server) consoleRoutes(mux *http.ServeMux) {
	if s.Console != nil {
		mux.Handle("GET /console/", s.Console)
	}
	mux.HandleFunc("GET /v1/jobs", s.auth(s.listJobs))
	mux.HandleFunc("GET /v1/jobs/{id}/request", s.auth(s.jobRequest))
	mux.HandleFunc("GET /v1/usage/daily", s.auth(s.dailyUsage))
	mux.HandleFunc("GET /v1/engines", s.auth(s.engineHealth))
	if s.Batches != nil {
		mux.HandleFunc("GET /v1/batches/{id}/events", s.auth(s.batchEvents))
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

// questionChars bounds the question a job summary shows.
const questionChars = 200

func summaryOf(j *state.Job) jobSummary {
	q := j.Question
	if q == "" {
		q = redact.Clip(questionOf(j.Request), questionChars) // a job recorded before questions were kept
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

// questionOf is the text of a stored request's last user turn (wire.Stored; or, in a
// record stored before requests were canonical, in any of the client protocols: Chat
// and Anthropic messages, a Responses input), or a direct search's query, or "".
func questionOf(req json.RawMessage) string {
	if st, err := wire.DecodeStored(req); err == nil && st.Format == wire.StoredFormat {
		return wire.LatestUserText(st.Request.Messages)
	}
	var r struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Input json.RawMessage `json:"input"`
		Query string          `json:"query"`
	}
	if json.Unmarshal(req, &r) != nil {
		return ""
	}
	if r.Query != "" {
		return r.Query
	}
	if len(r.Input) > 0 {
		var items []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(r.Input, &items) == nil {
			for i := len(items) - 1; i >= 0; i-- {
				if items[i].Role == "user" {
					return textOf(items[i].Content)
				}
			}
		}
		return textOf(r.Input)
	}
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return textOf(r.Messages[i].Content)
		}
	}
	return ""
}

// textOf reads message content: a string, or the text of its text parts.
func textOf(c json.RawMessage) string {
	var s string
	if json.Unmarshal(c, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(c, &parts)
	var b strings.Builder
	for _, p := range parts {
		if p.Text != "" {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// listJobs is GET /v1/jobs: the tenant's own recent jobs (the newest
// state.TenantJobsKept it submitted; a batch's lines are under their batch), newest
// first, paged with limit (1..100, default 20) and after (a job id).
func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, ok := listLimit(w, q.Get("limit"), 20, 100)
	if !ok {
		return
	}
	after := q.Get("after")
	if after != "" && !validJobID(after) {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "after", "after must be a job id from a previous page")
		return
	}
	js, more, err := s.Store.Jobs.TenantJobs(r.Context(), tenantOf(r), after, limit)
	if err != nil {
		s.logFailure(r.Context(), "api: listing jobs", "err", err)
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "", "Listing jobs failed; try again.")
		return
	}
	out := make([]jobSummary, len(js))
	for i, j := range js {
		out[i] = summaryOf(j)
	}
	writeJSON(w, http.StatusOK, listOf(out, func(v jobSummary) string { return v.ID }, more))
}

// jobRequest is GET /v1/jobs/{id}/request: the request the tenant's job was submitted
// with (as validated and stored, in the protocol it came in), and the text of its last
// user turn as "question".
func (s *Server) jobRequest(w http.ResponseWriter, r *http.Request) {
	job := s.loadJob(w, r)
	if job == nil {
		return
	}
	req := job.Request
	if len(req) == 0 {
		req = json.RawMessage("null")
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "job.request", "id": job.ID, "question": questionOf(job.Request), "request": req})
}

// dailyUsage is GET /v1/usage/daily?days=N: what the tenant's jobs spent per UTC day
// (the day each ended) and model, for the last N days (1..35, default 7), newest
// first. Direct searches are counted under "(search)".
func (s *Server) dailyUsage(w http.ResponseWriter, r *http.Request) {
	days := 7
	if v := r.URL.Query().Get("days"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > state.ModelSpendDays {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "", "days", fmt.Sprintf("days must be an integer from 1 to %d", state.ModelSpendDays))
			return
		}
		days = n
	}
	rows, err := s.Store.Ledger.ModelSpend(r.Context(), tenantOf(r), days, time.Now())
	if err != nil {
		s.logFailure(r.Context(), "api: reading spend per model", "err", err)
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "", "Reading usage failed; try again.")
		return
	}
	if rows == nil {
		rows = []state.ModelDaySpend{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "days": days, "data": rows})
}

// batchPoll is how often a batch's progress stream reads the batch.
const batchPoll = 500 * time.Millisecond

// batchEvents is GET /v1/batches/{id}/events: the batch object as server-sent events
// ("event: batch", the same object GET /v1/batches/{id} answers), once at the start
// and again whenever its status or counts change, ending after the batch has ended
// (completed, failed, expired, cancelled). It counts as one of the tenant's open
// streams and ends at FLEET_SSE_MAX_DURATION.
func (s *Server) batchEvents(w http.ResponseWriter, r *http.Request) {
	tenant := tenantOf(r)
	v, err := s.Batches.Get(r.Context(), tenant, r.PathValue("id"))
	if err != nil {
		writeBatchError(w, err)
		return
	}
	release, ok := s.admitWait(w, r, chatCodec, tenant, holdStream)
	if !ok {
		return
	}
	defer release()
	ctx, cancel := s.stream(w, r)
	defer cancel()
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
		next, err := s.Batches.Get(ctx, tenant, v.ID)
		if err != nil {
			if ctx.Err() == nil {
				s.Log.Warn("api: reading a batch for its progress stream", "batch", v.ID, "err", err)
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

// engineHealth is one engine in GET /v1/engines.
type engineHealth struct {
	ID       string `json:"id"`
	Searches int64  `json:"searches"`
	// Outcomes counts searches by outcome ("ok", "cached", "rate_limited",
	// "error_<kind>", …).
	Outcomes   map[string]int64 `json:"outcomes"`
	Errors     int64            `json:"errors"`
	ErrorRate  float64          `json:"error_rate"`
	LatencyP50 *float64         `json:"latency_p50_ms"`
	LatencyP95 *float64         `json:"latency_p95_ms"`
	// Cooldowns counts the engine's API keys put to rest, by reason; Fallbacks the
	// searches handed from it to another engine.
	Cooldowns map[string]int64 `json:"cooldowns"`
	Fallbacks int64            `json:"fallbacks"`
}

// engineHealth is GET /v1/engines: every configured engine's searches by outcome,
// error rate, latency (p50 and p95, estimated from the histogram's buckets),
// key cooldowns and fallbacks, from this ingress process's own metrics since it
// started (the whole fleet's when it runs all roles, as `make run` does). It holds
// no tenant's data: no tenant, no cost.
func (s *Server) engineHealth(w http.ResponseWriter, r *http.Request) {
	byID := map[string]*engineHealth{}
	get := func(id string) *engineHealth {
		e := byID[id]
		if e == nil {
			e = &engineHealth{ID: id, Outcomes: map[string]int64{}, Cooldowns: map[string]int64{}}
			byID[id] = e
		}
		return e
	}
	var ids []string
	if s.Tools != nil {
		for _, e := range s.Tools.Engines() {
			get(e.ID)
			ids = append(ids, e.ID)
		}
	}
	if s.Metrics != nil {
		families, err := s.Metrics.Registry.Gather()
		if err != nil {
			s.Log.Warn("api: gathering metrics for engine health", "err", err)
		}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				l := labels(m)
				switch f.GetName() {
				case "fleet_searches_total":
					e := get(l["engine"])
					n := int64(m.GetCounter().GetValue())
					e.Outcomes[l["outcome"]] += n
					e.Searches += n
					if strings.HasPrefix(l["outcome"], "error_") || l["outcome"] == "rate_limited" {
						e.Errors += n
					}
				case "fleet_search_seconds":
					e := get(l["engine"])
					e.LatencyP50 = quantileMS(m.GetHistogram(), 0.5)
					e.LatencyP95 = quantileMS(m.GetHistogram(), 0.95)
				case "fleet_engine_key_cooldowns_total":
					get(l["engine"]).Cooldowns[l["reason"]] += int64(m.GetCounter().GetValue())
				case "fleet_search_fallbacks_total":
					get(l["from"]).Fallbacks += int64(m.GetCounter().GetValue())
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
	out := make([]*engineHealth, 0, len(ids))
	for _, id := range ids {
		e := byID[id]
		if e.Searches > 0 {
			e.ErrorRate = math.Round(float64(e.Errors)/float64(e.Searches)*1e4) / 1e4
		}
		out = append(out, e)
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": out})
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
type ModelSpend struct{ Store *state.Store }

// JobFinished counts job once (state.Store.RecordModelSpend).
func (m ModelSpend) JobFinished(ctx context.Context, job *state.Job) error {
	return m.Store.Ledger.RecordModelSpend(ctx, job)
}
