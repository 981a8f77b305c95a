package engines

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/internal/redact"
)

// SearXNG is a self-hosted SearXNG metasearch instance (GET /search?format=json).
//
// There is no default base URL: SearXNG is always someone's own instance, so the
// constructor refuses a config without baseURL. The instance must allow JSON output
// ("json" in search.formats of its settings.yml); otherwise it answers 403, reported as
// a BadRequest that says so.
//
// No key is needed. When the engine has one (apiKeyEnv), it is sent as a bearer token,
// or, with the "username" option, as the password of HTTP basic auth, for instances
// behind an authenticating proxy.
//
// Options: {"categories": "general", "engines": "", "username": ""}. categories
// defaults to general (web results); engines, a comma-separated list, restricts the
// search to those SearXNG engines.
//
// Recency is SearXNG's time_range. It has day, month and year but no week, so oneWeek
// searches the past month and the dated hits older than a week are dropped here (with a
// warning that undated hits may be up to a month old); for the other windows dated hits
// outside the window are dropped too, for engines that ignore time_range. Count and the
// domain filters have no SearXNG parameter and are left to the shared normalization;
// language is SearXNG's language, country has no parameter.
//
// Cost is 0 by default: the instance is the operator's own.
type searxng struct {
	client
	opts searxngOptions
}

type searxngOptions struct {
	Categories string `json:"categories,omitempty"`
	Engines    string `json:"engines,omitempty"`
	Username   string `json:"username,omitempty"`
}

func newSearXNG(cfg Config, hc *http.Client) (Engine, error) {
	if strings.TrimSpace(cfg.BaseURL) == "" {
		return nil, fmt.Errorf("engine %q: kind searxng needs baseURL, the address of a SearXNG instance (there is no public default)", cfg.ID)
	}
	e := &searxng{client: newClient(cfg, hc, "")}
	if err := optionsOf(cfg, &e.opts); err != nil {
		return nil, err
	}
	e.opts.Categories = cmp.Or(e.opts.Categories, "general")
	e.price = priceOf(cfg, 0)
	e.caps = Capabilities{Recency: true, Language: true}
	return e, nil
}

var searxngRange = map[Recency]string{OneDay: "day", OneWeek: "month", OneMonth: "month", OneYear: "year"}

type searxngResponse struct {
	Results []struct {
		URL           string `json:"url"`
		Title         string `json:"title"`
		Content       string `json:"content"`
		PublishedDate string `json:"publishedDate"` // may be null
	} `json:"results"`
	UnresponsiveEngines []json.RawMessage `json:"unresponsive_engines"`
}

func (e *searxng) Search(ctx context.Context, q Query) (*Result, error) {
	body, err := e.do(ctx, request{method: http.MethodGet, path: "/search?" + e.params(q).Encode(), header: e.auth(), classify: searxngClassify})
	if err != nil {
		return nil, err
	}
	return e.parse(q, [][]byte{body})
}

func (e *searxng) params(q Query) url.Values {
	v := url.Values{}
	v.Set("q", q.Query)
	v.Set("format", "json")
	v.Set("categories", e.opts.Categories)
	if e.opts.Engines != "" {
		v.Set("engines", e.opts.Engines)
	}
	if q.Language != "" {
		v.Set("language", q.Language)
	}
	if r := searxngRange[q.Recency]; r != "" {
		v.Set("time_range", r)
	}
	v.Set("pageno", "1")
	return v
}

// auth is the credential header: none without a key, basic auth with the username
// option, a bearer token otherwise.
func (e *searxng) auth() http.Header {
	if e.key == "" {
		return nil
	}
	if e.opts.Username != "" {
		return header("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(e.opts.Username+":"+e.key)))
	}
	return bearer(e.key)
}

// searxngFormatHelp is what the operator must do when the instance refuses JSON.
const searxngFormatHelp = "the SearXNG instance refused format=json: enable json output by adding \"json\" to search.formats in its settings.yml (search: formats: [html, json]) and restart it"

// searxngAuthHelp explains any other 401/403: SearXNG has no authentication of its own,
// so it comes from a proxy in front of the instance.
const searxngAuthHelp = "the SearXNG instance, or an authenticating proxy in front of it, refused access: set apiKeyEnv (sent as a bearer token) or the username option with apiKeyEnv (basic auth) to the proxy's credentials"

// searxngClassify turns SearXNG's own 403 — the bare Flask/Werkzeug "Forbidden" page,
// or an empty body, which is how it refuses a format not in search.formats — into a
// BadRequest that tells the operator how to enable JSON. Other 401/403 answers come
// from an authenticating proxy and stay Auth, with a message in our words: a proxy's
// page is noise, and may echo credentials this keyless kind cannot know to redact.
func searxngClassify(e *Error) {
	switch m := e.Message; {
	case e.Status == http.StatusForbidden && (m == "" || strings.Contains(m, "<h1>Forbidden</h1>") || strings.Contains(m, "permission to access the requested resource")):
		e.Kind, e.Message = BadRequest, searxngFormatHelp
	case e.Status == http.StatusForbidden || e.Status == http.StatusUnauthorized:
		e.Message = searxngAuthHelp
	}
}

func (e *searxng) parse(q Query, bodies [][]byte) (*Result, error) {
	var resp searxngResponse
	if err := decodeClassic(&e.client, bodies, &resp); err != nil {
		return nil, err
	}
	down := searxngUnresponsive(resp.UnresponsiveEngines)
	if len(resp.Results) == 0 && len(down) > 0 {
		return nil, &Error{Kind: Unavailable, Engine: e.id, Message: redact.Truncate("no engine of the SearXNG instance answered: "+strings.Join(down, ", "), 300)}
	}
	res := &Result{Usage: Usage{Searches: 1, CostUSD: e.price}}
	if len(down) > 0 {
		res.partialf("SearXNG engines that did not answer: %s", redact.Truncate(strings.Join(down, ", "), 300))
	}
	now := time.Now()
	for _, r := range resp.Results {
		res.Hits = append(res.Hits, Hit{Title: cleanHTML(r.Title), URL: r.URL, Snippet: clipSnippet(cleanHTML(r.Content)), Published: readDate(r.PublishedDate, now)})
	}
	if win, ok := q.Recency.Window(); ok {
		dropped := res.dropOlder(now.Add(-win))
		switch {
		case q.Recency == OneWeek:
			res.warnf("SearXNG has no one-week range: searched the past month and dropped %d dated hit(s) older than a week; undated hits may be up to a month old", dropped)
		case dropped > 0:
			res.warnf("%d hit(s) older than the %s window were dropped (engines that ignore time_range)", dropped, q.Recency)
		}
	}
	return res, nil
}

// searxngUnresponsive names the engines in unresponsive_engines, [["brave","Suspended:
// too many requests"], …], as "brave (Suspended: too many requests)".
func searxngUnresponsive(raw []json.RawMessage) []string {
	var out []string
	for _, r := range raw {
		var pair []any
		if json.Unmarshal(r, &pair) == nil && len(pair) > 0 {
			name, _ := pair[0].(string)
			if len(pair) > 1 {
				if why, ok := pair[1].(string); ok && why != "" {
					name += " (" + why + ")"
				}
			}
			if name != "" {
				out = append(out, name)
			}
			continue
		}
		var s string
		if json.Unmarshal(r, &s) == nil && s != "" {
			out = append(out, s)
		}
	}
	return out
}
