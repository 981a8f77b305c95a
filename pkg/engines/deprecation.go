package engines

import (
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// A provider announces a retirement with a Deprecation or Sunset header (RFC 9745,
// RFC 8594) and carries it out with 404 or 410 on the endpoint. Every engine call is
// watched for the three, so that an operator hears of a retirement before it breaks
// searches: each sighting goes to Options.Deprecation (the fleet_provider_deprecation
// metric), and one warning per engine per day to the log.

// DeprecationSignal is what a provider's answer said about its endpoint's retirement.
type DeprecationSignal struct {
	// Deprecation and Sunset are the headers' values, "" when absent.
	Deprecation, Sunset string
	// Status is the answer's status when it is 404 or 410 (the endpoint is gone), else 0.
	Status int
}

// Any reports whether the answer said anything about a retirement.
func (s DeprecationSignal) Any() bool { return s.Deprecation != "" || s.Sunset != "" || s.Status != 0 }

// Signals are the signal's labels for the metric: "deprecation", "sunset", "404", "410".
func (s DeprecationSignal) Signals() []string {
	var out []string
	if s.Deprecation != "" {
		out = append(out, "deprecation")
	}
	if s.Sunset != "" {
		out = append(out, "sunset")
	}
	if s.Status != 0 {
		out = append(out, strconv.Itoa(s.Status))
	}
	return out
}

// SignalOf reads an answer's status and headers.
func SignalOf(status int, h http.Header) DeprecationSignal {
	s := DeprecationSignal{Deprecation: h.Get("Deprecation"), Sunset: h.Get("Sunset")}
	if status == http.StatusNotFound || status == http.StatusGone {
		s.Status = status
	}
	return s
}

// watch is the RoundTripper of one engine's calls: it passes every answer on as it
// came, after reporting its retirement signals.
type watch struct {
	base   http.RoundTripper
	engine string
	report func(engine string, s DeprecationSignal)
}

func (w *watch) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := w.base.RoundTrip(r)
	if err == nil {
		if s := SignalOf(resp.StatusCode, resp.Header); s.Any() {
			w.report(w.engine, s)
		}
	}
	return resp, err
}

// watched is hc with engine's answers watched: a copy of hc whose transport reports.
func watched(hc *http.Client, engine string, report func(string, DeprecationSignal)) *http.Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c := *hc
	c.Transport = &watch{base: base, engine: engine, report: report}
	return &c
}

// deprecationLog logs one warning per engine per day, and passes every sighting to
// count.
type deprecationLog struct {
	log   *slog.Logger
	count func(engine, signal string)
	now   func() time.Time
	mu    sync.Mutex
	last  map[string]string // engine → day of its last warning
}

func (d *deprecationLog) report(engine string, s DeprecationSignal) {
	if d.count != nil {
		for _, sig := range s.Signals() {
			d.count(engine, sig)
		}
	}
	day := d.now().UTC().Format(time.DateOnly)
	d.mu.Lock()
	if d.last[engine] == day {
		d.mu.Unlock()
		return
	}
	d.last[engine] = day
	d.mu.Unlock()
	d.log.Warn("engine: the provider says its endpoint is deprecated or gone; check the engine before searches fail",
		"engine", engine, "deprecation", s.Deprecation, "sunset", s.Sunset, "status", s.Status)
}
