package ingress

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/metrics"
)

// Ops is the internal listener every role process serves on FLEET_METRICS_ADDR, for
// Prometheus and the orchestrator's probes, apart from the API:
//
//	GET /metrics  the process's metrics (Prometheus text format)
//	GET /healthz  200 {"status":"ok"} while the process runs (liveness)
//	GET /readyz   200 {"status":"ready","checks":{"nats":"ok","redis":"ok"}} when NATS
//	              and Redis answer, else 503 {"status":"unavailable","checks":{…}} with
//	              "unreachable" for each that does not (readiness)
//
// The checks are stable words; why a dependency failed goes to the log.
type Ops struct {
	Bus *bus.Bus
	// Store is the fleet's state, pinged by /readyz (*state.Store implements it).
	Store   Health
	Metrics *metrics.Metrics
	Log     *slog.Logger
}

// Handler returns the internal routes.
func (o *Ops) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("GET /readyz", o.readyz)
	if o.Metrics != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(o.Metrics.Registry, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	}
	return mux
}

// healthz answers /healthz: the process runs.
func healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers /readyz: whether NATS and Redis answer, in stable words.
func (o *Ops) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{"nats": "ok", "redis": "ok"}
	ready := true
	if up, status := o.Bus.Connected(); !up {
		checks["nats"], ready = "unreachable", false
		o.Log.Warn("readyz: nats not connected", "status", status)
	}
	if err := o.Store.Ping(ctx); err != nil {
		checks["redis"], ready = "unreachable", false
		o.Log.Warn("readyz: redis does not answer", "err", err)
	}
	if !ready {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "checks": checks})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "checks": checks})
}
