package engines

import (
	"cmp"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// A provider announces a retirement with a Deprecation or Sunset header (RFC 9745,
// RFC 8594) and carries it out with 404 or 410 on the endpoint. Every engine and
// main-model call is watched for the three (DeprecationWatch), so that an operator
// hears of a retirement before it breaks searches or answers: each sighting goes to
// the fleet_provider_deprecation metric, and one warning per provider per day to the
// log.

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

// watch is the RoundTripper of one provider's calls: it passes every answer on as it
// came, after reporting its retirement signals.
type watch struct {
	base   http.RoundTripper
	name   string
	report func(name string, s DeprecationSignal)
}

func (w *watch) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := w.base.RoundTrip(r)
	if err == nil {
		if s := SignalOf(resp.StatusCode, resp.Header); s.Any() {
			w.report(w.name, s)
		}
	}
	return resp, err
}

// DeprecationWatch watches the calls of engines and main models for retirement
// signals: every sighting is counted (the fleet_provider_deprecation metric, by
// provider — an engine id or a main model's provider name — and signal), and one
// warning per provider per day is logged.
type DeprecationWatch struct {
	log   *slog.Logger
	count func(provider, signal string)
	mu    sync.Mutex
	last  map[string]string // provider → day of its last warning
}

// NewDeprecationWatch logs to log (nil: slog.Default()) and counts with count (nil:
// nothing).
func NewDeprecationWatch(log *slog.Logger, count func(provider, signal string)) *DeprecationWatch {
	return &DeprecationWatch{log: cmp.Or(log, slog.Default()), count: count, last: map[string]string{}}
}

// Client is hc (nil: http.DefaultClient) with provider's answers watched: a copy of hc
// whose transport reports.
func (d *DeprecationWatch) Client(hc *http.Client, provider string) *http.Client {
	c := *cmp.Or(hc, http.DefaultClient)
	c.Transport = &watch{base: cmp.Or(c.Transport, http.DefaultTransport), name: provider, report: d.report}
	return &c
}

func (d *DeprecationWatch) report(provider string, s DeprecationSignal) {
	if d.count != nil {
		for _, sig := range s.Signals() {
			d.count(provider, sig)
		}
	}
	day := time.Now().UTC().Format(time.DateOnly)
	d.mu.Lock()
	if d.last[provider] == day {
		d.mu.Unlock()
		return
	}
	d.last[provider] = day
	d.mu.Unlock()
	d.log.Warn("provider: the endpoint is deprecated or gone; check it before calls fail",
		"provider", provider, "deprecation", s.Deprecation, "sunset", s.Sunset, "status", s.Status)
}
