package ingress

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/batch"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// The read routes the web console (pkg/ingress/console) is built on, for any client;
// each is tenant-scoped like the rest of the API and bounded:
//
//	GET /v1/jobs                  the tenant's recent jobs, newest first (limit 1..100, after)
//	GET /v1/jobs/{id}/request     the request a job was submitted with, and its question
//	GET /v1/batches/{id}/events   a batch's progress as server-sent events until it ends
//	GET /v1/usage/daily           the tenant's spend per day and model (days 1..35)
//	GET /v1/engines               each engine's health: outcome shares, error rate, latency, cooldowns

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

// listJobs is GET /v1/jobs: the tenant's own recent jobs (the newest
// state.TenantJobsKept it submitted; a batch's lines are under their batch), newest
// first, paged with limit (1..100, default 20) and after (a job id).
func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, ok := countParam(w, q, "limit", 20, 100)
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
	writeJSON(w, http.StatusOK, listOf(mapped(js, summaryOf), func(v jobSummary) string { return v.ID }, more))
}

// jobRequest is GET /v1/jobs/{id}/request: the request the tenant's job was submitted
// with (as validated and stored, in the protocol it came in), and the text of its last
// user turn as "question".
func (s *Server) jobRequest(w http.ResponseWriter, r *http.Request, job *state.Job) {
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
	days, ok := countParam(w, r.URL.Query(), "days", 7, state.ModelSpendDays)
	if !ok {
		return
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
	ctx, done, ok := s.openStream(w, r, chatCodec, tenant)
	if !ok {
		return
	}
	defer done()
	rc := startSSE(w)
	send := func(v batch.View) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: batch\ndata: %s\n\n", b)
		rc.Flush()
	}
	send(v)
	last, quiet := progressOf(v), time.Now()
	tick := time.NewTicker(batchPoll)
	defer tick.Stop()
	for !batch.Ended(v.Status) {
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
			rc.Flush()
		}
	}
}

func progressOf(v batch.View) string {
	c := v.RequestCounts
	return fmt.Sprintf("%s %d %d %d", v.Status, c.Total, c.Completed, c.Failed)
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
func (s *Server) engineHealth(w http.ResponseWriter, r *http.Request) {
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
