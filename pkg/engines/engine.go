// Package engines turns one normalized web search query into one normalized result,
// whatever answers it: an LLM with grounded search (GLM, Gemini, OpenAI, Anthropic,
// Kimi, Perplexity, OpenRouter) or a classic search API (Brave, Tavily, SearXNG, Exa,
// Serper, Perplexity Search, Cloudflare Web Search, Parallel, Linkup).
//
// An engine is a name and a Search method. Everything an engine kind has in common —
// query validation, domain and count filters the provider cannot apply, the numbered
// Sources list, the compact text the main model reads, URL hygiene — is done once, by
// the Registry's wrapper (see normalize.go), so a kind's file only speaks its wire
// format. Errors are *Error values whose Kind says whether a retry can help.
package engines

import (
	"context"
	"time"
)

// Engine runs one web search. Implementations are safe for concurrent use.
type Engine interface {
	// Name is the configured engine id ("glm", "google", "brave"), the token used in
	// the fleet.search.v1.<engine> subject.
	Name() string
	// Search runs q and returns a normalized result. Failures are *Error values; a
	// search that ran and found nothing is a Result with no hits, not an error.
	Search(ctx context.Context, q Query) (*Result, error)
}

// Recency limits results to a time window. The zero value means NoLimit.
type Recency string

// The recency windows of the web_search tool schema.
const (
	OneDay   Recency = "oneDay"
	OneWeek  Recency = "oneWeek"
	OneMonth Recency = "oneMonth"
	OneYear  Recency = "oneYear"
	NoLimit  Recency = "noLimit"
)

// recencyUnit is each window as the providers that name it by its unit take it
// (Perplexity, Tavily).
var recencyUnit = map[Recency]string{OneDay: "day", OneWeek: "week", OneMonth: "month", OneYear: "year"}

// recencyWindow is how far back each window reaches.
var recencyWindow = map[Recency]time.Duration{
	OneDay: 24 * time.Hour, OneWeek: 7 * 24 * time.Hour, OneMonth: 31 * 24 * time.Hour, OneYear: 366 * 24 * time.Hour,
}

// Valid reports whether r is one of the schema's values (or empty).
func (r Recency) Valid() bool {
	_, ok := recencyWindow[r]
	return ok || r == "" || r == NoLimit
}

// Window returns how far back r reaches, and false for NoLimit.
func (r Recency) Window() (time.Duration, bool) {
	w, ok := recencyWindow[r]
	return w, ok
}

// since is the start of r's window counted back from now, in UTC and layout; "" for
// no limit.
func (r Recency) since(now time.Time, layout string) string {
	win, ok := r.Window()
	if !ok {
		return ""
	}
	return now.Add(-win).UTC().Format(layout)
}

// Count limits. A zero Count means DefaultCount.
const (
	DefaultCount = 10
	MaxCount     = 50
)

// Query is one normalized search request.
type Query struct {
	// Query is the search text; required, non-empty after trimming.
	Query string `json:"query"`
	// Recency limits results by age; empty means no limit.
	Recency Recency `json:"recency,omitempty"`
	// Count is the number of hits wanted, 1..MaxCount; zero means DefaultCount.
	Count int `json:"count,omitempty"`
	// AllowedDomains keeps only hits on these domains (and their subdomains).
	AllowedDomains []string `json:"allowed_domains,omitempty"`
	// BlockedDomains drops hits on these domains (and their subdomains).
	BlockedDomains []string `json:"blocked_domains,omitempty"`
	// Language is a BCP 47 language hint ("en", "zh-CN") where the engine takes one.
	Language string `json:"language,omitempty"`
	// Country is an ISO 3166-1 alpha-2 country hint ("US") where the engine takes one.
	Country string `json:"country,omitempty"`
	// ContextSize is how much page text a grounded engine feeds its model: "low",
	// "medium" or "high"; empty means the engine's configured default.
	ContextSize string `json:"context_size,omitempty"`
	// Strict refuses the search, naming the engine and the option, when the engine
	// can neither honour an option the query carries nor have the fleet apply it
	// exactly; otherwise such an option is answered with a warning (honours.go).
	Strict bool `json:"strict,omitempty"`
	// MaxAge, when set, bounds how old a cached result may be, in seconds: 0 makes the
	// search run although a cached result exists. Engines ignore it; the search
	// worker's cache reads it.
	MaxAge *int `json:"max_age,omitempty"`
	// Cache "only" answers from the cache or says it has nothing, without a paid
	// call; empty is the usual cache-then-search.
	Cache string `json:"cache,omitempty"`
}

// CacheOnly is the Query.Cache value that allows no paid call.
const CacheOnly = "only"

// Result is one normalized search result.
type Result struct {
	// Engine is the configured engine id that produced the result.
	Engine string `json:"engine"`
	// Query is the query that was searched (after trimming).
	Query string `json:"query,omitempty"`
	// Summary is the model-written answer of an LLM-grounded engine, with inline [n]
	// markers that number Citation.Sources. Classic search APIs leave it empty.
	Summary string `json:"summary,omitempty"`
	// Hits are the search results, best first.
	Hits []Hit `json:"hits"`
	// Citation is the WebSearchResult form (seed 003): the text the main model reads.
	Citation Citation `json:"citation"`
	// Usage is what the search cost.
	Usage Usage `json:"usage"`
	// Warnings name filters the engine could not apply and anything else the caller
	// should know; they are never silently dropped.
	Warnings []string `json:"warnings,omitempty"`
	// Partial is set when the provider did not finish its answer (cut at a limit,
	// stopped early, some of its searches or backends failed; a warning says which):
	// usable, but never cached.
	Partial bool `json:"partial,omitempty"`
}

// Hit is one search result.
type Hit struct {
	Title     string    `json:"title"`
	URL       string    `json:"url"`
	Source    string    `json:"source,omitempty"` // site or publisher name
	Snippet   string    `json:"snippet,omitempty"`
	Published time.Time `json:"published,omitzero"`
}

// Citation is the WebSearchResult of seed 003.
type Citation struct {
	// LLMContent is markdown with inline [n] markers and a "Sources:" list; every
	// marker numbers an entry of Sources.
	LLMContent string `json:"llmContent"`
	// ReturnDisplay is a short status line for people.
	ReturnDisplay string `json:"returnDisplay"`
	// Sources are the numbered sources: [n] refers to Sources[n-1].
	Sources []Source `json:"sources,omitempty"`
	// Error is set when the search failed; LLMContent then tells the model so.
	Error *CitationError `json:"error,omitempty"`
}

// Source is one numbered source.
type Source struct {
	Web Web `json:"web"`
}

// Web is a web page source.
type Web struct {
	Title string `json:"title,omitempty"`
	URI   string `json:"uri"`
}

// CitationError is the error of a WebSearchResult: a type the model can branch on and
// a message it can read.
type CitationError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// Usage is what one search cost.
type Usage struct {
	Searches int `json:"searches"`
	// Cached counts the searches answered from the fleet's cache, which cost nothing
	// and are not in Searches.
	Cached       int     `json:"cached,omitempty"`
	InputTokens  int     `json:"input_tokens,omitempty"`
	OutputTokens int     `json:"output_tokens,omitempty"`
	CostUSD      float64 `json:"cost_usd,omitempty"`
}

// Add accumulates u2 into u.
func (u *Usage) Add(u2 Usage) {
	u.Searches += u2.Searches
	u.Cached += u2.Cached
	u.InputTokens += u2.InputTokens
	u.OutputTokens += u2.OutputTokens
	u.CostUSD += u2.CostUSD
}

// Capabilities says which query fields an engine applies natively. Fields it cannot
// apply are applied after the fact by the normalization layer where possible (domains,
// count) and otherwise refused, for a strict query, or reported in Result.Warnings
// (honours.go).
type Capabilities struct {
	Recency        bool
	Count          bool
	AllowedDomains bool
	BlockedDomains bool
	Language       bool
	Country        bool
	ContextSize    bool
}

// Capable is implemented by engines that apply some query fields natively. An engine
// that does not implement it is treated as applying none of them.
type Capable interface {
	Capabilities() Capabilities
}

// capsOf is what e applies natively: none of the fields when it is not Capable.
func capsOf(e Engine) Capabilities {
	if c, ok := e.(Capable); ok {
		return c.Capabilities()
	}
	return Capabilities{}
}
