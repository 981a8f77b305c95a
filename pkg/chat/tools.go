package chat

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/fetch"
	"github.com/searchfleet/searchfleet/pkg/intent"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/search"
)

// The server tools (seed 002's registry): each is a name the model calls, the schema
// a hop is offered, the validation of a call's arguments, the subject its calls are
// published on, and the renderer of its results into the model's tool message. The
// chat worker finds a call's tool by its function name, so dispatch, resume and
// rendering are the same steps for every tool:
//
//   - web_search: the query goes to one engine's subject (search workers);
//   - web_fetch: the URL goes to the fetch subject (the same workers' pool), and the
//     page comes back as one source, numbered with the search results.
//
// A call's stored record names its tool (call.Tool, empty for web_search, so chains
// stored before the registry still read).
type serverTool struct {
	// schema is the tools[] entry a hop is offered (gp: the Google-preferred narrowing
	// of web_search).
	schema func(w *Worker, gp bool) json.RawMessage
	// plan validates one call's arguments and fills c (c.Local with c.Result when the
	// call is answered without running: rejected arguments, a limit).
	plan func(w *Worker, v *view, t *turn, tc wire.ToolCall, p *planState, c *call)
	// request is the message that runs a planned call, and its subject.
	request func(v *view, h int, t *turn, c call) (subject string, msg bus.Payload)
	// render is the text the model reads for a result, its sources numbered into the
	// chain's sequence.
	render func(d *search.Done, srcs *sources) string
}

// planState is what planning one hop's calls counts across its calls.
type planState struct {
	searches, searchBudget, searchLimit int
	fetches, fetchBudget, fetchLimit    int
}

// serverTools is the registry, by the name the model calls.
var serverTools = map[string]*serverTool{
	intent.ToolName: {
		schema:  func(w *Worker, gp bool) json.RawMessage { return w.Tools.Tool(gp) },
		plan:    planSearch,
		request: searchRequest,
		render:  func(d *search.Done, srcs *sources) string { return render(&d.Result, srcs) },
	},
	intent.FetchToolName: {
		schema:  func(*Worker, bool) json.RawMessage { return intent.FetchTool() },
		plan:    planFetch,
		request: fetchRequest,
		render:  renderPage,
	},
}

// toolOf is the registry entry of a stored call (empty: web_search, as every call
// stored before web_fetch was).
func toolOf(c call) *serverTool {
	if c.Tool == "" {
		return serverTools[intent.ToolName]
	}
	return serverTools[c.Tool]
}

// renderDone is the text the model reads for a recorded result of any tool.
func renderDone(d *search.Done, srcs *sources) string {
	if d.Engine == search.FetchEngine || d.Page != nil {
		return serverTools[intent.FetchToolName].render(d, srcs)
	}
	return serverTools[intent.ToolName].render(d, srcs)
}

// planSearch is web_search's plan: validated arguments and a chosen engine, or the
// per-job search limit.
func planSearch(w *Worker, v *view, t *turn, tc wire.ToolCall, p *planState, c *call) {
	opts := v.req.Search
	parsed, aerr := w.Tools.Parse(tc.Arguments, t.GooglePreferred)
	switch {
	case aerr != nil:
		c.Local, c.Result = true, aerr.Result()
	case p.searches >= p.searchBudget:
		c.Engine, c.Query = parsed.Engine, parsed.Query
		c.Local, c.Result = true, engines.InvalidArgumentsResult("SEARCH_LIMIT_REACHED", "The search limit for this request is reached.",
			fmt.Sprintf("This request may make at most %d web searches; answer with the results you already have.", p.searchLimit))
	default:
		parsed.Query = withRequestOptions(parsed.Query, opts)
		parsed = w.Tools.Route(parsed, t.GooglePreferred) // the request's options may be ones the chosen engine lacks
		c.Engine, c.Choice, c.Query = parsed.Engine, parsed.Choice, parsed.Query
		if opts != nil && opts.Engine != "" {
			if _, ok := w.Tools.Engine(opts.Engine); ok {
				c.Engine, c.Choice = opts.Engine, "request" // the request named the engine for all its searches
			}
		}
		p.searches++
	}
}

func searchRequest(v *view, h int, t *turn, c call) (string, bus.Payload) {
	return bus.SubjectSearchOf(c.Engine, v.job.Band, v.job.Tenant), search.Request{JobID: v.job.ID, Hop: h, CallID: c.ID, Engine: c.Engine, Query: c.Query,
		Deadline: v.job.Deadline, GooglePreferred: t.GooglePreferred, Tenant: v.job.Tenant, Band: v.job.Band}
}

// planFetch is web_fetch's plan: a URL of the right shape, within the per-job fetch
// limit.
func planFetch(w *Worker, v *view, t *turn, tc wire.ToolCall, p *planState, c *call) {
	c.Tool, c.Engine = intent.FetchToolName, search.FetchEngine
	u, aerr := intent.ParseFetch(tc.Arguments)
	switch {
	case aerr != nil:
		c.Local, c.Result = true, aerr.Result()
		c.Result.Engine = search.FetchEngine
	case p.fetches >= p.fetchBudget:
		c.URL, c.Query.Query = u, u
		c.Local, c.Result = true, search.PageResult(&fetch.Page{URL: u, Error: &fetch.Error{Type: fetch.ErrLimit,
			Message: fmt.Sprintf("this request may make at most %d web fetches", p.fetchLimit)}})
	default:
		c.URL, c.Query.Query = u, u
		p.fetches++
	}
}

func fetchRequest(v *view, h int, _ *turn, c call) (string, bus.Payload) {
	return bus.SubjectFetch, search.FetchRequest{JobID: v.job.ID, Hop: h, CallID: c.ID, URL: c.URL, Deadline: v.job.Deadline, Tenant: v.job.Tenant, Band: v.job.Band}
}

// renderPage is the tool message of a fetched page: the page as one numbered source,
// what the fetch saw (cut short, no readable text), then its text. The page's own
// "[n]" marks are removed: in a tool result they number the fleet's sources only.
// An error result is the error's own text.
func renderPage(d *search.Done, srcs *sources) string {
	res := &d.Result
	if res.Citation.Error != nil {
		return res.Citation.LLMContent
	}
	p := d.Page
	if p == nil {
		p = &fetch.Page{URL: res.Query}
	}
	var b strings.Builder
	if len(res.Citation.Sources) == 0 {
		// No readable content: shown, but not a source an answer may cite.
		fmt.Fprintf(&b, "Web page fetched from %q (no readable content: not a source to cite).\n\n", markerFreeURL(p.URL))
	} else {
		src := res.Citation.Sources[0]
		n := srcs.add(src)
		title := engines.CleanText(strings.Join(strings.Fields(src.Web.Title), " "))
		if title == "" {
			title = src.Web.URI
		}
		fmt.Fprintf(&b, "Web page fetched from %q:\n\n", markerFreeURL(src.Web.URI))
		b.WriteString("Sources:\n")
		fmt.Fprintf(&b, "[%d] %s (%s)\n", n, engines.RenumberMarkers(title, func(int) int { return 0 }), markerFreeURL(src.Web.URI))
	}
	switch p.Kind {
	case fetch.KindJSShell:
		b.WriteString("Kind: js_shell. The page is a JavaScript application's shell: it has no readable text without running its scripts. Do not treat it as the page's content.\n")
	case fetch.KindEmpty:
		b.WriteString("Kind: empty. The page has no readable content.\n")
	}
	if p.Truncated {
		b.WriteString("Truncated: true. The page was longer than the fetch limit; this is its beginning.\n")
	}
	if text := strings.TrimSpace(p.Text); text != "" {
		b.WriteString("\nPage text:\n")
		b.WriteString(engines.RenumberMarkers(engines.CleanText(text), func(int) int { return 0 }))
		b.WriteByte('\n')
	}
	return b.String()
}

// markerFreeURL escapes the brackets of a URL shown to the model, so that no part of
// it reads as a [n] marker.
func markerFreeURL(u string) string { return strings.NewReplacer("[", "%5B", "]", "%5D").Replace(u) }

// offerFetch reports whether hop h offers web_fetch: the fleet serves it (MaxFetches),
// the client has no web_fetch tool of its own, the job may still fetch, and the model
// has a URL to read — one in the latest user message, or a source of a search result
// already in the chain.
func (w *Worker) offerFetch(v *view, h int) bool {
	if w.MaxFetches <= 0 || h >= w.MaxHops-1 || slices.Contains(v.toolNames, intent.FetchToolName) {
		return false
	}
	if v.fetches(h) >= w.fetchLimit(v) {
		return false
	}
	if o := v.req.Search; o != nil && o.Fetch {
		return true // the request declared web_fetch (Anthropic's server tool)
	}
	if len(intent.URLs(wire.LatestUserText(v.req.Messages))) > 0 {
		return true
	}
	_, srcs := v.history(h)
	return len(srcs.list) > 0
}

// searchLimit is the job's web_search limit: the fleet's, narrowed (never raised) by
// the request's max_uses.
func (w *Worker) searchLimit(v *view) int {
	if o := v.req.Search; o != nil && o.MaxUses > 0 {
		return min(o.MaxUses, w.MaxSearches)
	}
	return w.MaxSearches
}

// fetchLimit is the job's fetch limit: the fleet's, lowered by the request's own (a
// negative one: none).
func (w *Worker) fetchLimit(v *view) int {
	o := v.req.Search
	switch {
	case o == nil || o.MaxFetches == 0:
		return w.MaxFetches
	case o.MaxFetches < 0:
		return 0
	}
	return min(o.MaxFetches, w.MaxFetches)
}

// fetches counts the fetches the hops before h ran (answered without running: not
// counted).
func (v *view) fetches(h int) int {
	n := 0
	for k := 0; k < h; k++ {
		for _, c := range v.calls(k) {
			if c.Tool == intent.FetchToolName && !c.Local {
				n++
			}
		}
	}
	return n
}

// traceExcerpt bounds the page text a trace entry keeps.
const traceExcerpt = 2000

// tracePage fills a fetch's trace entry from its result: the page's status, size,
// whether it was cut short, its kind and the beginning of its text.
func tracePage(e *traceEntry, d *search.Done) {
	p := d.Page
	if p == nil {
		return
	}
	e.Status, e.Bytes, e.Truncated, e.Kind = p.Status, p.Bytes, p.Truncated, p.Kind
	if p.Error == nil {
		e.Excerpt, _ = fetch.CutRunes(p.Text, traceExcerpt)
	}
	if !p.Retrieved.IsZero() {
		e.RetrievedAt = p.Retrieved.Format(time.RFC3339)
	}
}
