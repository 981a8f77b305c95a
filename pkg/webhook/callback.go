package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/netguard"
)

// Callback is a job's (or batch's) callback as the client gives it and as it is
// stored with the job: where to deliver, and for which terminal statuses.
type Callback struct {
	URL string `json:"url"`
	// Events are the statuses that trigger a delivery (default: completed, failed,
	// cancelled).
	Events []string `json:"events"`
}

// knownEvents are the event names a callback may ask for: the terminal statuses of a
// job, "expired", which only a batch reaches, and "requires_action", which only a
// research run reaches (and always sends).
var knownEvents = []string{"completed", "failed", "cancelled", "expired", "requires_action"}

// defaultEvents are the events of a callback that names none: every way a job ends.
var defaultEvents = []string{"completed", "failed", "cancelled"}

// Wants reports whether the callback asks for event (a status such as "completed").
func (c Callback) Wants(event string) bool { return slices.Contains(c.Events, event) }

// DecodeCallback reads a callback as stored with a job.
func DecodeCallback(raw json.RawMessage) (Callback, error) {
	var c Callback
	if err := json.Unmarshal(raw, &c); err != nil {
		return Callback{}, fmt.Errorf("stored callback unreadable: %w", err)
	}
	return c, nil
}

// parseCallback reads a client's callback strictly — unknown fields and unknown event
// names are errors, so a typo is not a silently missing webhook — and fills in the
// default events. It checks the URL's shape, not where it leads.
func parseCallback(raw json.RawMessage) (Callback, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var c Callback
	if err := dec.Decode(&c); err != nil {
		return Callback{}, fmt.Errorf("callback must be an object {\"url\": …, \"events\": […]}: %s", redact.JSONError(err))
	}
	if dec.More() {
		return Callback{}, fmt.Errorf("callback must be a single JSON object")
	}
	if c.URL == "" {
		return Callback{}, fmt.Errorf("callback.url is required")
	}
	u, err := netguard.CheckShape(c.URL)
	if err != nil {
		return Callback{}, err
	}
	if u.User != nil {
		// The job record keeps the callback: credentials in it would be stored and
		// shown in clear. Deliveries are signed (webhook-signature) instead.
		return Callback{}, fmt.Errorf("%w: the callback url must not carry credentials (user:password@); verify the webhook-signature header instead", netguard.ErrRefused)
	}
	if len(c.Events) == 0 {
		c.Events = slices.Clone(defaultEvents)
	}
	var events []string
	for _, e := range c.Events {
		if !slices.Contains(knownEvents, e) {
			return Callback{}, fmt.Errorf("callback.events: unknown event %q (known: %s)", e, strings.Join(knownEvents, ", "))
		}
		if !slices.Contains(events, e) {
			events = append(events, e)
		}
	}
	c.Events = events
	return c, nil
}

// hostOf returns the host of a URL for messages ("?" if it has none).
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return "?"
	}
	return u.Hostname()
}
