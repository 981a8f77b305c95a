package intent

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// FetchToolName is the name of the second server-side tool: read one page by URL.
const FetchToolName = "web_fetch"

// FetchToolDescription is the web_fetch function description shown to the main model.
const FetchToolDescription = "Fetch one web page by its URL (from the user's message or a search result) and read its text. " +
	"The page counts as a numbered source; cite it as [n]. The result says when the page was cut short (truncated), " +
	"had no readable text (kind js_shell or empty), or could not be fetched."

// MaxFetchURLChars bounds a web_fetch URL.
const MaxFetchURLChars = 2048

// fetchTool is the tools[] entry, computed once.
var fetchTool = func() json.RawMessage {
	b, _ := marshal(map[string]any{"type": "function", "function": map[string]any{
		"name":        FetchToolName,
		"description": FetchToolDescription,
		"parameters": map[string]any{"type": "object", "required": []string{"url"}, "properties": map[string]any{
			"url": map[string]any{"type": "string", "description": fmt.Sprintf("The absolute http or https URL of the page (at most %d characters).", MaxFetchURLChars)},
		}},
	}}) // a constant value: encoding cannot fail
	return b
}()

// FetchTool returns the OpenAI chat tools[] entry for web_fetch. Callers must not
// modify it.
func FetchTool() json.RawMessage { return fetchTool[:len(fetchTool):len(fetchTool)] }

// ParseFetch validates a web_fetch call's arguments ({"url": …}) and returns the URL.
// The URL's shape is checked here; where it leads is the fetcher's to check.
func ParseFetch(arguments string) (string, *ArgError) {
	fields, e := decodeObject(arguments)
	if e != nil {
		e.Display = strings.Replace(e.Display, "web_search", "web_fetch", 1)
		return "", e
	}
	for k := range fields {
		if k != "url" {
			return "", &ArgError{Type: InvalidToolArguments, Display: "web_fetch got unknown arguments.",
				Details: "Unknown argument " + clip(k, 40) + `: web_fetch takes only "url".`}
		}
	}
	var u string
	if absent(fields["url"]) || json.Unmarshal(fields["url"], &u) != nil || strings.TrimSpace(u) == "" {
		return "", &ArgError{Type: InvalidToolArguments, Display: "web_fetch needs a url.",
			Details: `Send {"url": "https://…"} with the page's absolute URL.`}
	}
	u = strings.TrimSpace(u)
	if len(u) > MaxFetchURLChars {
		return "", &ArgError{Type: InvalidToolArguments, Display: "The web_fetch url is too long.",
			Details: fmt.Sprintf("The url is %d characters long, at most %d are accepted.", len(u), MaxFetchURLChars)}
	}
	if !strings.HasPrefix(strings.ToLower(u), "http://") && !strings.HasPrefix(strings.ToLower(u), "https://") {
		return "", &ArgError{Type: InvalidToolArguments, Display: "web_fetch reads http and https URLs only.",
			Details: "The url must start with http:// or https://."}
	}
	if pu, err := url.Parse(u); err == nil && pu.User != nil {
		// An HTTP client sends a URL's user:password as Basic auth, and the call's URL
		// is kept with the job: refused before it is stored or fetched, as callbacks
		// are. The message does not repeat the URL.
		return "", &ArgError{Type: InvalidToolArguments, Display: "web_fetch does not send credentials.",
			Details: "The url carries a user name or password (user:password@host). web_fetch reads public pages only and never sends credentials: " +
				"call web_fetch again with the URL without the user:password@ part, or answer without this page."}
	}
	return u, nil
}

// urlRE finds http(s) URLs in text: up to white space, quotes, brackets or braces,
// an IPv6 literal's brackets right after the scheme excepted (https://[2001:db8::1]/).
var urlRE = regexp.MustCompile(`https?://(?:\[[0-9A-Fa-f:.]+\])?[^\s"'<>()\[\]{}]*`)

// URLs returns the http(s) URLs written in text, trailing punctuation trimmed.
func URLs(text string) []string {
	var out []string
	for _, m := range urlRE.FindAllString(text, 20) {
		m = strings.TrimRight(m, ".,;:!?")
		if len(m) > len("https://") {
			out = append(out, m)
		}
	}
	return out
}
