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
	// StepsInFlight are the messages each consumer's handlers work on in this process.
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
	m := &Metrics{
		Registry:            r,
		HTTPRequests:        counter("fleet_http_requests_total", "Ingress requests by route and status.", "route", "status"),
		Jobs:                counter("fleet_jobs_total", "Jobs by final status.", "status"),
		JobSeconds:          prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fleet_job_seconds", Help: "Time from accepting a job to its end.", Buckets: latency}),
		ModelCalls:          counter("fleet_model_calls_total", "Main-model calls by provider and outcome.", "provider", "outcome"),
		ModelSeconds:        histogram("fleet_model_call_seconds", "Main-model call latency.", "provider"),
		Searches:            counter("fleet_searches_total", "Searches by engine and outcome.", "engine", "outcome"),
		SearchSeconds:       histogram("fleet_search_seconds", "Engine call latency.", "engine"),
		SearchCostUSD:       counter("fleet_search_cost_usd_total", "What searches cost, by engine.", "engine"),
		Deliveries:          counter("fleet_deliveries_total", "Consumer outcomes by consumer and action.", "consumer", "action"),
		StepSeconds:         histogram("fleet_step_seconds", "Handler time per consumer.", "consumer"),
		Webhooks:            counter("fleet_webhook_deliveries_total", "Webhook delivery attempts by outcome.", "outcome"),
		WebhookDeferred:     counter("fleet_webhook_deferred_total", "Webhook deliveries held back by a fairness cap (the tenant's in-flight cap or the destination's limit), by tenant and reason.", "tenant", "reason"),
		Orphans:             counter("fleet_orphan_messages_total", "Messages about a job Redis does not know, by consumer (dead-lettered, not paid for).", "consumer"),
		Reconciled:          prometheus.NewCounter(prometheus.CounterOpts{Name: "fleet_jobs_reconciled_total", Help: "Jobs whose Redis status was restored from the terminal event the stream recorded."}),
		Citations:           counter("fleet_citations_total", "Citation markers of final answers: valid, or removed (cited no retrieved source).", "result"),
		TenantRejected:      counter("fleet_tenant_rejected_total", "Requests refused by a per-tenant limit, by tenant and limit.", "tenant", "limit"),
		SearchFallbacks:     counter("fleet_search_fallbacks_total", "Searches handed from a failed engine to a fallback engine, by engine, fallback and reason.", "from", "to", "reason"),
		KeyCooldowns:        counter("fleet_engine_key_cooldowns_total", "Engine API keys put to rest after the provider refused them, by engine and reason.", "engine", "reason"),
		ModelKeyCooldowns:   counter("fleet_model_key_cooldowns_total", "Main-model provider API keys put to rest after the provider refused them, by provider and reason.", "provider", "reason"),
		ProviderDeprecation: counter("fleet_provider_deprecation", "Engine and main-model answers that announced their endpoint's retirement (Deprecation or Sunset header) or carried it out (404, 410), by provider (an engine id or a model provider's name) and signal.", "provider", "signal"),
		StepsInFlight:       prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fleet_steps_in_flight", Help: "Messages a consumer's handlers are working on in this process."}, []string{"consumer"}),
		SpendUSD:            counter("fleet_spend_usd_total", "What paid calls cost, by tenant, kind (search, model) and source (engine or model).", "tenant", "kind", "source"),
		BudgetExhausted:     counter("fleet_budget_exhausted_total", "Searches and jobs refused on a used-up tenant budget, by tenant and budget.", "tenant", "budget"),
		Fetches:             counter("fleet_fetch_total", "web_fetch calls by outcome.", "outcome"),
	}
	r.MustRegister(m.HTTPRequests, m.Jobs, m.JobSeconds, m.ModelCalls, m.ModelSeconds, m.Searches, m.SearchSeconds, m.SearchCostUSD,
		m.Deliveries, m.StepSeconds, m.Webhooks, m.WebhookDeferred, m.Orphans, m.Reconciled, m.Citations, m.TenantRejected,
		m.SearchFallbacks, m.KeyCooldowns, m.ModelKeyCooldowns, m.ProviderDeprecation, m.StepsInFlight, m.SpendUSD, m.BudgetExhausted, m.Fetches)
	return m
}

// latency are the buckets of the latency histograms, in seconds.
var latency = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

func counter(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func histogram(name, help string, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: latency}, labels)
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
