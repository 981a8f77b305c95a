package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/searchfleet/searchfleet/internal/redact"
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
// job, and "expired", which only a batch reaches.
var knownEvents = []string{"completed", "failed", "cancelled", "expired"}

// defaultEvents are the events of a callback that names none: every way a job ends.
var defaultEvents = []string{"completed", "failed", "cancelled"}

// maxURLLen bounds a callback URL: longer ones are not receivers, and the URL travels
// with every delivery message.
const maxURLLen = 2048

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
	u, err := checkShape(c.URL)
	if err != nil {
		return Callback{}, err
	}
	if u.User != nil {
		// The job record keeps the callback: credentials in it would be stored and
		// shown in clear. Deliveries are signed (webhook-signature) instead.
		return Callback{}, fmt.Errorf("%w: the callback url must not carry credentials (user:password@); verify the webhook-signature header instead", ErrRefused)
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

// checkShape checks what can be checked of a callback URL without resolving it: it
// parses, is http or https, has a host and a valid port, and is not too long.
// Errors name the host at most, never credentials or the query.
func checkShape(raw string) (*url.URL, error) {
	if len(raw) > maxURLLen {
		return nil, fmt.Errorf("%w: the callback url is longer than %d bytes", ErrRefused, maxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: the callback url does not parse", ErrRefused)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%w: the callback url must be http or https, not %q", ErrRefused, u.Scheme)
	}
	host := u.Hostname()
	if u.Opaque != "" || host == "" {
		return nil, fmt.Errorf("%w: the callback url has no host", ErrRefused)
	}

	if p := u.Port(); p != "" && !validPort(p) {
		return nil, fmt.Errorf("%w: host %s: %q is not a port", ErrRefused, host, p)
	}
	return u, nil
}

func validPort(p string) bool {
	n := 0
	for _, c := range p {
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
		if n > 65535 {
			return false
		}
	}
	return n >= 1
}

// hostOf returns the host of a URL for messages ("?" if it has none).
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return "?"
	}
	return u.Hostname()
}
