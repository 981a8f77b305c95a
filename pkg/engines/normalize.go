package engines

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/searchfleet/searchfleet/internal/redact"
)

// normalized wraps every configured engine: it validates the query, applies the filters
// the engine cannot, and enforces the result's invariants, so each kind only has to
// speak its wire format.
type normalized struct {
	id    string
	inner Engine
	caps  Capabilities
}

func newNormalized(id string, e Engine) *normalized {
	return &normalized{id: id, inner: e, caps: capsOf(e)}
}

func (n *normalized) Name() string { return n.id }

func (n *normalized) Capabilities() Capabilities { return n.caps }

func (n *normalized) Search(ctx context.Context, q Query) (*Result, error) {
	return n.search(ctx, q, true)
}

// SearchStructured runs q on e as e.Search does, but a configured engine (a
// Registry's) leaves the result's LLMContent empty: for a caller that renders the text
// the model reads from the structured result itself (the chat worker numbers all the
// sources of a chain in one sequence), so the engine's own rendering would be thrown
// away. Render fills it in afterwards if need be.
func SearchStructured(ctx context.Context, e Engine, q Query) (*Result, error) {
	if n, ok := e.(*normalized); ok {
		return n.search(ctx, q, false)
	}
	return e.Search(ctx, q)
}

// Render sets the LLMContent of a successful result that has none (one of
// SearchStructured, or stored without it), as the Registry's engines render it.
func Render(res *Result) {
	if res.Citation.Error == nil && res.Citation.LLMContent == "" {
		res.Citation.LLMContent = BuildLLMContent(res.Query, res.Summary, res.Citation.Sources, res.Hits, nil)
	}
}

// search is Search, with the result's LLMContent rendered or left out.
func (n *normalized) search(ctx context.Context, q Query, render bool) (*Result, error) {
	q, err := CheckQuery(q)
	if err != nil {
		return nil, &Error{Kind: BadRequest, Engine: n.id, Message: err.Error()}
	}
	if err := refuseStrict(n.id, n.caps, q); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, AsError(n.id, err)
	}
	res, err := n.inner.Search(ctx, q)
	if err != nil {
		e := AsError(n.id, err)
		e.Engine = n.id
		return nil, e
	}
	if res == nil {
		return nil, &Error{Kind: Decode, Engine: n.id, Message: "engine returned no result"}
	}
	finish(res, n.id, q, n.caps, time.Now())
	if render {
		Render(res)
	}
	return res, nil
}

// CheckQuery validates q and fills defaults: the query is trimmed and non-empty,
// recency is one of the schema's values, count is 1..MaxCount (0 means DefaultCount),
// domains are bare lower-case host names.
func CheckQuery(q Query) (Query, error) {
	q.Query = strings.TrimSpace(q.Query)
	if q.Query == "" {
		return q, fmt.Errorf("query is empty")
	}
	if !utf8.ValidString(q.Query) {
		return q, fmt.Errorf("query is not valid UTF-8")
	}
	if !q.Recency.Valid() {
		return q, fmt.Errorf("recency %q is not one of oneDay, oneWeek, oneMonth, oneYear, noLimit", q.Recency)
	}
	q.Recency = cmp.Or(q.Recency, NoLimit)
	switch {
	case q.Count == 0:
		q.Count = DefaultCount
	case q.Count < 1 || q.Count > MaxCount:
		return q, fmt.Errorf("count %d is outside 1..%d", q.Count, MaxCount)
	}
	var err error
	if q.AllowedDomains, err = cleanDomains(q.AllowedDomains); err != nil {
		return q, err
	}
	if q.BlockedDomains, err = cleanDomains(q.BlockedDomains); err != nil {
		return q, err
	}
	if !slices.Contains(contextSizes, q.ContextSize) {
		return q, fmt.Errorf("context_size %q is not low, medium or high", q.ContextSize)
	}
	if q.MaxAge != nil && *q.MaxAge < 0 {
		return q, fmt.Errorf("max_age %d is negative", *q.MaxAge)
	}
	if q.Cache != "" && q.Cache != CacheOnly {
		return q, fmt.Errorf("cache %q is not %q", q.Cache, CacheOnly)
	}
	return q, nil
}

// contextSizes are the values of Query.ContextSize ("" for the engine's default).
var contextSizes = []string{"", "low", "medium", "high"}

func cleanDomains(ds []string) ([]string, error) {
	if len(ds) == 0 {
		return nil, nil
	}
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		d = strings.ToLower(strings.TrimSpace(d))
		if u, err := url.Parse(d); err == nil && u.Host != "" {
			d = u.Hostname()
		}
		d = strings.TrimPrefix(strings.TrimSuffix(d, "."), "www.")
		if d == "" || strings.ContainsAny(d, " /?#@") {
			return nil, fmt.Errorf("domain %q is not a host name", d)
		}
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out, nil
}

// finish applies the after-the-fact filters and enforces the invariants every result
// meets: hits and sources carry absolute http(s) URLs, every [n] marker numbers an
// entry of Sources, ReturnDisplay is rendered the same way for all (and LLMContent,
// by Render, the same way from what finish leaves).
func finish(res *Result, id string, q Query, caps Capabilities, now time.Time) {
	res.Engine = id
	res.Query = q.Query
	res.Summary = CleanText(res.Summary)
	if res.Hits == nil {
		res.Hits = []Hit{}
	}

	// URL hygiene first, so the filters below see real hosts.
	bad := 0
	hits := res.Hits[:0]
	for _, h := range res.Hits {
		u, ok := CleanURL(h.URL)
		if !ok {
			bad++
			continue
		}
		h.URL = u
		// Titles and snippets are plain text (PlainText: no markup, encoded or not),
		// whichever engine gave them: they reach clients as citation titles.
		h.Title = oneLine(PlainText(h.Title))
		h.Snippet = PlainText(h.Snippet)
		if h.Source == "" {
			h.Source = hostOf(u)
		}
		hits = append(hits, h)
	}
	res.Hits = hits
	if bad > 0 {
		res.warnf("%d hit(s) without an absolute http(s) URL were dropped", bad)
	}

	// Domain filters are applied to every result, natively filtered or not: providers
	// do not always honour their own filters, and applying them again is harmless. Only
	// a filter the engine cannot apply itself earns a warning.
	site := siteOf(res.Hits)
	keep := func(u string) bool {
		h := site(u)
		return (len(q.AllowedDomains) == 0 || domainIn(h, q.AllowedDomains)) && !domainIn(h, q.BlockedDomains)
	}
	if len(q.AllowedDomains) > 0 || len(q.BlockedDomains) > 0 {
		before := len(res.Hits)
		res.Hits = slices.DeleteFunc(res.Hits, func(h Hit) bool { return !keep(h.URL) })
		dropped := before - len(res.Hits)
		switch {
		case !caps.AllowedDomains && len(q.AllowedDomains) > 0 || !caps.BlockedDomains && len(q.BlockedDomains) > 0:
			msg := "domain filters are not supported by engine " + id + " and were applied to its results afterwards"
			if dropped > 0 {
				msg += fmt.Sprintf(" (%d hit(s) dropped)", dropped)
			}
			if res.Summary != "" {
				msg += "; the summary may still draw on filtered pages"
			}
			res.warnf("%s", msg)
		case dropped > 0:
			res.warnf("the engine was sent the domain filters but returned %d hit(s) outside the domain filters; they were dropped", dropped)
		}
	}

	if win, ok := q.Recency.Window(); ok && !caps.Recency {
		res.warnf("recency %s is not supported by engine %s: applied afterwards to dated hits only (%d dropped); undated hits were kept", q.Recency, id, res.dropOlder(now.Add(-win)))
	}
	if !caps.Language && q.Language != "" {
		res.warnf("language %q is not supported by engine %s and was ignored", q.Language, id)
	}
	if !caps.Country && q.Country != "" {
		res.warnf("country %q is not supported by engine %s and was ignored", q.Country, id)
	}
	if !caps.ContextSize && q.ContextSize != "" {
		res.warnf("context_size %q is not supported by engine %s and was ignored", q.ContextSize, id)
	}
	if len(res.Hits) > q.Count {
		res.Hits = res.Hits[:q.Count] // applied afterwards where not native: no warning needed
	}

	// Sources: those the engine numbered (its markers refer to them), else the hits.
	if len(res.Citation.Sources) == 0 {
		res.Citation.Sources = sourcesOf(res.Hits)
	}
	fixSources(res, keep)

	res.Citation.ReturnDisplay = cmp.Or(res.Citation.ReturnDisplay,
		fmt.Sprintf("Search results for %q returned (%d sources).", redact.Truncate(q.Query, 100), len(res.Citation.Sources)))
	res.Citation.LLMContent = "" // Render's, from the finished result
	if res.Usage.Searches == 0 {
		res.Usage.Searches = 1
	}
}

// fixSources drops sources that are not absolute http(s) or fail the domain filter,
// merges duplicates, and renumbers the summary's markers to match; markers that number
// no source are removed.
func fixSources(res *Result, keep func(string) bool) {
	old := res.Citation.Sources
	mapping := make([]int, len(old)+1) // old 1-based index -> new 1-based index, 0 = gone
	byURL := make(map[string]int, len(old))
	var out []Source
	for i, s := range old {
		u, ok := CleanURL(s.Web.URI)
		if !ok || !keep(u) {
			continue
		}
		if n, dup := byURL[u]; dup {
			mapping[i+1] = n
			continue
		}
		s.Web.URI = u
		s.Web.Title = oneLine(PlainText(s.Web.Title))
		out = append(out, s)
		byURL[u] = len(out)
		mapping[i+1] = len(out)
	}
	res.Citation.Sources = out
	if res.Summary == "" {
		return
	}
	removed := 0
	res.Summary = RenumberMarkers(res.Summary, func(n int) int {
		if n >= 1 && n < len(mapping) && mapping[n] > 0 {
			return mapping[n]
		}
		removed++
		return 0
	})
	res.Summary = collapseMarkers(res.Summary)
	if removed > 0 {
		res.warnf("%d citation marker(s) without a usable source were removed", removed)
	}
}

// collapseMarkers turns runs like "[2][2]" (from merged duplicate sources) into "[2]".
func collapseMarkers(s string) string {
	if !strings.Contains(s, "][") {
		return s
	}
	var b strings.Builder
	last := ""
	idx := markerRE.FindAllStringIndex(s, -1)
	prevEnd := 0
	for _, m := range idx {
		tok := s[m[0]:m[1]]
		adjacent := m[0] == prevEnd && prevEnd != 0
		if adjacent && strings.Contains(last, tok) {
			prevEnd = m[1]
			continue
		}
		b.WriteString(s[prevEnd:m[0]])
		b.WriteString(tok)
		if adjacent {
			last += tok
		} else {
			last = tok
		}
		prevEnd = m[1]
	}
	b.WriteString(s[prevEnd:])
	return b.String()
}

func (r *Result) warnf(format string, args ...any) {
	r.Warnings = append(r.Warnings, fmt.Sprintf(format, args...))
}

// dropOlder drops the dated hits published before cutoff (undated ones stay) and
// returns how many went.
func (r *Result) dropOlder(cutoff time.Time) int {
	before := len(r.Hits)
	r.Hits = slices.DeleteFunc(r.Hits, func(h Hit) bool { return !h.Published.IsZero() && h.Published.Before(cutoff) })
	return before - len(r.Hits)
}

// sourcesOf is hits as numbered sources, in order.
func sourcesOf(hits []Hit) []Source {
	out := make([]Source, 0, len(hits))
	for _, h := range hits {
		out = append(out, Source{Web: Web{Title: h.Title, URI: h.URL}})
	}
	return out
}

// partialf is warnf for an answer the provider did not finish: the result is Partial.
func (r *Result) partialf(format string, args ...any) {
	r.Partial = true
	r.warnf(format, args...)
}

// CleanURL returns u as an absolute http(s) URL, or false. Spaces (Gemini sometimes
// returns literal "google.com/search?q=a b" URIs) are escaped rather than refused.
func CleanURL(u string) (string, bool) {
	u = strings.TrimSpace(u)
	if u == "" {
		return "", false
	}
	if strings.ContainsAny(u, " \t") {
		u = strings.NewReplacer(" ", "%20", "\t", "%09").Replace(u)
	}
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return "", false
	}
	return p.String(), true
}

// redirectors are hosts whose URLs stand for another site: Gemini grounding returns
// vertexaisearch redirect URLs and names the real site in the hit's title/Source.
var redirectors = []string{"vertexaisearch.cloud.google.com"}

// siteOf returns a function giving the site a URL belongs to: its host, or, for a
// redirect URL, the Source of the hit carrying it.
func siteOf(hits []Hit) func(string) string {
	bySource := map[string]string{}
	for _, h := range hits {
		if h.Source != "" {
			bySource[h.URL] = strings.TrimPrefix(strings.ToLower(h.Source), "www.")
		}
	}
	return func(u string) string {
		h := hostOf(u)
		if slices.Contains(redirectors, h) {
			if s, ok := bySource[u]; ok {
				return s
			}
		}
		return h
	}
}

// hostOf returns u's host name without a leading "www.", or "".
func hostOf(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(strings.ToLower(p.Hostname()), "www.")
}

// domainIn reports whether host is one of domains or a subdomain of one.
func domainIn(host string, domains []string) bool {
	for _, d := range domains {
		if host == d || strings.HasSuffix(host, "."+d) {
			return true
		}
	}
	return false
}

// Insert is a marker to place into a text at an offset.
type Insert struct {
	Offset int    // in the unit of the function that takes it
	Text   string // e.g. "[1][3]"
}

// InsertAtBytes places each insert at its UTF-8 byte offset into text (Gemini's
// groundingSupports unit). Offsets past the end go to the end; offsets inside a
// multi-byte character move forward to its end. Inserts at the same offset keep their
// order.
func InsertAtBytes(text string, ins []Insert) string {
	if len(ins) == 0 {
		return text
	}
	ins = slices.Clone(ins)
	for i := range ins {
		o := min(max(ins[i].Offset, 0), len(text))
		for o < len(text) && !utf8.RuneStart(text[o]) {
			o++
		}
		ins[i].Offset = o
	}
	slices.SortStableFunc(ins, func(a, b Insert) int { return a.Offset - b.Offset })
	var b strings.Builder
	b.Grow(len(text) + 8*len(ins))
	prev := 0
	for _, in := range ins {
		b.WriteString(text[prev:in.Offset])
		b.WriteString(in.Text)
		prev = in.Offset
	}
	b.WriteString(text[prev:])
	return b.String()
}

// CharToByte converts a code point offset into text to a byte offset (clamped).
func CharToByte(text string, chars int) int {
	bi := 0
	for ci := 0; ci < chars && bi < len(text); ci++ {
		_, size := utf8.DecodeRuneInString(text[bi:])
		bi += size
	}
	return bi
}

// MarkerText renders sorted, unique 1-based source numbers as "[1][3]".
func MarkerText(nums []int) string {
	nums = slices.Clone(nums)
	slices.Sort(nums)
	nums = slices.Compact(nums)
	var b strings.Builder
	for _, n := range nums {
		if n > 0 {
			fmt.Fprintf(&b, "[%d]", n)
		}
	}
	return b.String()
}
