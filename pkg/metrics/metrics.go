// Package metrics holds the fleet's Prometheus metrics. One Metrics value per process,
// registered on its own registry (no globals), served by ingress at /metrics.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the fleet's counters and histograms.
type Metrics struct {
	Registry *prometheus.Registry

	// HTTPRequests counts ingress requests by route and status.
	HTTPRequests *prometheus.CounterVec
	// Jobs counts jobs by how they ended (completed, failed, cancelled).
	Jobs *prometheus.CounterVec
	// JobSeconds is the time from accepting a job to its end.
	JobSeconds prometheus.Histogram
	// ModelCalls counts main-model calls by provider and outcome.
	ModelCalls *prometheus.CounterVec
	// ModelSeconds is main-model call latency by provider.
	ModelSeconds *prometheus.HistogramVec
	// Searches counts searches by engine and outcome (ok, error, cached, rate_limited;
	// replay and dedupe: answered from a recorded result, nothing searched).
	Searches *prometheus.CounterVec
	// SearchSeconds is engine call latency by engine.
	SearchSeconds *prometheus.HistogramVec
	// SearchCostUSD sums what searches cost, by engine.
	SearchCostUSD *prometheus.CounterVec
	// Deliveries counts consumer outcomes by consumer and action.
	Deliveries *prometheus.CounterVec
	// StepSeconds is handler time per consumer.
	StepSeconds *prometheus.HistogramVec
	// Webhooks counts webhook delivery attempts by outcome.
	Webhooks *prometheus.CounterVec
	// WebhookDeferred counts webhook deliveries held back by a fairness cap (not
	// attempted, tried again shortly), by tenant and reason (tenant, destination).
	WebhookDeferred *prometheus.CounterVec
	// Orphans counts messages about a job Redis does not know (it lost the job, or
	// the record expired), by consumer: dead-lettered, never paid for.
	Orphans *prometheus.CounterVec
	// Reconciled counts jobs whose Redis status was put back to the ending the event
	// stream recorded (Redis had lost an acknowledged write).
	Reconciled prometheus.Counter
	// Citations counts the [n] markers of final answers: valid, or removed because
	// they cited no source the job retrieved.
	Citations *prometheus.CounterVec
	// TenantRejected counts requests refused by a per-tenant limit, by tenant and
	// limit (rate, sync_waits, streams, queued_jobs, batches, files, file_bytes).
	TenantRejected *prometheus.CounterVec
	// SearchFallbacks counts searches handed from a failed engine to a fallback
	// engine, by the engine that failed, the one that took over, and why.
	SearchFallbacks *prometheus.CounterVec
	// KeyCooldowns counts engine API keys put to rest after the provider refused
	// them, by engine and reason (rate_limited, auth, quota).
	KeyCooldowns *prometheus.CounterVec
	// ModelKeyCooldowns counts main-model provider API keys put to rest after the
	// provider refused them, by provider and reason (rate_limited, auth, quota).
	ModelKeyCooldowns *prometheus.CounterVec
	// ProviderDeprecation counts engine and main-model answers that announced the
	// endpoint's retirement (a Deprecation or Sunset header) or carried it out (404,
	// 410), by provider (an engine id, a model provider's name) and signal.
	ProviderDeprecation *prometheus.CounterVec
	// StepsInFlight are the messages each consumer's handlers work on (lag.go).
	StepsInFlight *prometheus.GaugeVec

	queues *queueCollector // WatchQueues
	// SpendUSD sums what paid calls cost (settled), by tenant, kind (search, model)
	// and source (the engine or the model). Tenants are the config's, engines and
	// models too: the labels stay bounded.
	SpendUSD *prometheus.CounterVec
	// BudgetExhausted counts searches and jobs refused because a tenant's budget was
	// used up, by tenant and budget (usd_day, usd_month, searches_day, searches_month,
	// request, batch).
	BudgetExhausted *prometheus.CounterVec
	// Fetches counts web_fetch calls by outcome (ok, truncated, js_shell, empty, the
	// error type in lower case: fetch_refused, fetch_http_error, …; or replay and
	// dedupe for a page read from a record, no fetch made).
	Fetches *prometheus.CounterVec
}

// New creates and registers the metrics.
func New() *Metrics {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	latency := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}
	m := &Metrics{
		Registry:      r,
		HTTPRequests:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_http_requests_total", Help: "Ingress requests by route and status."}, []string{"route", "status"}),
		Jobs:          prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_jobs_total", Help: "Jobs by final status."}, []string{"status"}),
		JobSeconds:    prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fleet_job_seconds", Help: "Time from accepting a job to its end.", Buckets: latency}),
		ModelCalls:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_model_calls_total", Help: "Main-model calls by provider and outcome."}, []string{"provider", "outcome"}),
		ModelSeconds:  prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "fleet_model_call_seconds", Help: "Main-model call latency.", Buckets: latency}, []string{"provider"}),
		Searches:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_searches_total", Help: "Searches by engine and outcome."}, []string{"engine", "outcome"}),
		SearchSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "fleet_search_seconds", Help: "Engine call latency.", Buckets: latency}, []string{"engine"}),
		SearchCostUSD: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_search_cost_usd_total", Help: "What searches cost, by engine."}, []string{"engine"}),
		Deliveries:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_deliveries_total", Help: "Consumer outcomes by consumer and action."}, []string{"consumer", "action"}),
		StepSeconds:   prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "fleet_step_seconds", Help: "Handler time per consumer.", Buckets: latency}, []string{"consumer"}),
		Webhooks:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_webhook_deliveries_total", Help: "Webhook delivery attempts by outcome."}, []string{"outcome"}),
		Orphans:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_orphan_messages_total", Help: "Messages about a job Redis does not know, by consumer (dead-lettered, not paid for)."}, []string{"consumer"}),
		Reconciled:    prometheus.NewCounter(prometheus.CounterOpts{Name: "fleet_jobs_reconciled_total", Help: "Jobs whose Redis status was restored from the terminal event the stream recorded."}),
		Citations:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_citations_total", Help: "Citation markers of final answers: valid, or removed (cited no retrieved source)."}, []string{"result"}),
		StepsInFlight: newStepsInFlight(),
	}
	m.TenantRejected = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_tenant_rejected_total", Help: "Requests refused by a per-tenant limit, by tenant and limit."}, []string{"tenant", "limit"})
	r.MustRegister(m.TenantRejected)
	m.SearchFallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_search_fallbacks_total", Help: "Searches handed from a failed engine to a fallback engine, by engine, fallback and reason."}, []string{"from", "to", "reason"})
	m.KeyCooldowns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_engine_key_cooldowns_total", Help: "Engine API keys put to rest after the provider refused them, by engine and reason."}, []string{"engine", "reason"})
	r.MustRegister(m.SearchFallbacks, m.KeyCooldowns)
	m.ModelKeyCooldowns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_model_key_cooldowns_total", Help: "Main-model provider API keys put to rest after the provider refused them, by provider and reason."}, []string{"provider", "reason"})
	r.MustRegister(m.ModelKeyCooldowns)
	m.ProviderDeprecation = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_provider_deprecation", Help: "Engine and main-model answers that announced their endpoint's retirement (Deprecation or Sunset header) or carried it out (404, 410), by provider (an engine id or a model provider's name) and signal."}, []string{"provider", "signal"})
	r.MustRegister(m.ProviderDeprecation)
	m.WebhookDeferred = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_webhook_deferred_total", Help: "Webhook deliveries held back by a fairness cap (the tenant's in-flight cap or the destination's limit), by tenant and reason."}, []string{"tenant", "reason"})
	r.MustRegister(m.WebhookDeferred)
	r.MustRegister(m.HTTPRequests, m.Jobs, m.JobSeconds, m.ModelCalls, m.ModelSeconds, m.Searches, m.SearchSeconds,
		m.SearchCostUSD, m.Deliveries, m.StepSeconds, m.Webhooks, m.Orphans, m.Reconciled, m.StepsInFlight, m.Citations)
	m.SpendUSD = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_spend_usd_total", Help: "What paid calls cost, by tenant, kind (search, model) and source (engine or model)."}, []string{"tenant", "kind", "source"})
	m.BudgetExhausted = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_budget_exhausted_total", Help: "Searches and jobs refused on a used-up tenant budget, by tenant and budget."}, []string{"tenant", "budget"})
	r.MustRegister(m.SpendUSD, m.BudgetExhausted)
	m.Fetches = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_fetch_total", Help: "web_fetch calls by outcome."}, []string{"outcome"})
	r.MustRegister(m.Fetches)
	return m
}

// The kinds of paid call fleet_spend_usd_total counts.
const (
	SpendSearch = "search"
	SpendModel  = "model"
)

// Spend adds usd to what tenant spent on source (an engine or a model) of kind.
func (m *Metrics) Spend(tenant, kind, source string, usd float64) {
	if m == nil || usd <= 0 {
		return
	}
	m.SpendUSD.WithLabelValues(tenant, kind, source).Add(usd)
}

// ObserveDelivery is a bus.ConsumeOptions.Observe function.
func (m *Metrics) ObserveDelivery(consumer, action string, elapsed time.Duration) {
	m.Deliveries.WithLabelValues(consumer, action).Inc()
	m.StepSeconds.WithLabelValues(consumer).Observe(elapsed.Seconds())
}
