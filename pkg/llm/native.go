package llm

// NativeKey is the field of a Chat assistant message in which a model caller reports
// the provider's own (native) web search of that answer: the chat worker reads it into
// the job's sources, trace and cost, and removes it from what the client sees.
const NativeKey = "searchfleet_native"

// NativeSearch is what a provider's own web search did in one answer.
type NativeSearch struct {
	// Protocol is the model protocol that searched ("anthropic-messages").
	Protocol string `json:"protocol"`
	// Requests are the billed searches; CostUSD their price.
	Requests int     `json:"requests"`
	CostUSD  float64 `json:"cost_usd"`
	// Searches are the queries with the URLs each found, in order.
	Searches []NativeQuery `json:"searches"`
	// Sources are the cited pages, numbered as the answer's [n] markers (from 1).
	Sources []NativeSource `json:"sources"`
	// Unfinished is set when the model was still searching when its rounds ran out
	// (Kimi): the answer is missing or partial.
	Unfinished bool `json:"unfinished,omitempty"`
}

// NativeQuery is one native search.
type NativeQuery struct {
	ID    string   `json:"id"`
	Query string   `json:"query"`
	URLs  []string `json:"urls"`
	// Error is the provider's error code when the search failed.
	Error string `json:"error,omitempty"`
}

// NativeSource is one cited page.
type NativeSource struct {
	URL   string `json:"url"`
	Title string `json:"title"`
}

// WebSearchTool is the name of the fleet's server-side web_search function as the
// chain offers it to a model (intent.ToolName; a test of pkg/llm/upstream holds them
// equal). The model callers read it here, so that they, and the grounded engines built
// on them, need not import the intent rules.
const WebSearchTool = "web_search"

// IsWebSearchCall reports whether a tool with this function name is the fleet's
// web_search (intent.IsWebSearchCall).
func IsWebSearchCall(name string) bool { return name == WebSearchTool }
