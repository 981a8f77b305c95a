package llm

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// SearchOptions are one request's own settings for the fleet's web_search tool, read
// from whatever declaration its protocol uses: Chat web_search_options, a
// {"type":"web_search"} entry in tools (the fleet's own, OpenRouter's
// openrouter:web_search, Gemini's googleSearch, Kimi's $web_search), a Responses
// web_search tool, an Anthropic web_search_20250305 server tool. A request that
// carries any of them asked for search: the fleet offers web_search on it whatever
// the intent rules say.
//
// They travel with the job in the stored request (ChatRequest.Search). They can only
// narrow what the fleet does: MaxUses lowers the per-job search limit, never raises it.
type SearchOptions struct {
	// Requested is set when the request declared search: offer the tool regardless of
	// intent classification.
	Requested bool `json:"requested"`
	// Engine names one of the fleet's engines for every search ("" = the fleet chooses).
	Engine string `json:"engine,omitempty"`
	// MaxUses caps this request's searches (0 = the fleet's limit).
	MaxUses int `json:"max_uses,omitempty"`
	// MaxCostUSD caps what this request may spend, model turns and searches together,
	// in US dollars (0 = no cap): a search that would pass it is not made, and the
	// model answers with what it has.
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
	// Count is the number of hits per search (0 = the engine default). It comes from
	// max_results, or from search_context_size: low 5, medium 10, high 20.
	Count int `json:"count,omitempty"`
	// AllowedDomains / BlockedDomains become every search's domain filters.
	AllowedDomains []string `json:"allowed_domains,omitempty"`
	BlockedDomains []string `json:"blocked_domains,omitempty"`
	// Country is the ISO 3166-1 alpha-2 code of user_location: the engines' country hint.
	Country string `json:"country,omitempty"`
	// ContextSize is search_context_size as sent (low, medium, high).
	ContextSize string `json:"search_context_size,omitempty"`
	// Tool is the type of the provider's own search tool to send, where a provider
	// has versions of it (Anthropic web_search_YYYYMMDD; "" is the default version).
	Tool string `json:"tool,omitempty"`
	// Unhonoured says, in words for the client, which settings the fleet cannot honour
	// (a city, a time zone, a cached-only index…). The answer repeats them.
	Unhonoured []string `json:"unhonoured,omitempty"`
	// Fetch is set when the request declared a web_fetch tool (Anthropic's server
	// tool): offer web_fetch whenever the model has a URL to read. MaxFetches caps its
	// fetches (0 = the fleet's limit; negative = none, as for a research run's child
	// that may read no page).
	Fetch      bool `json:"fetch,omitempty"`
	MaxFetches int  `json:"max_fetches,omitempty"`
	// Forced is set when the request's tool_choice names web_search: the first model
	// call that offers it must call it; later ones may answer.
	Forced bool `json:"forced,omitempty"`
	// MaxAge bounds how old, in seconds, a cached result of every search may be (nil:
	// what the cache keeps; 0: always a paid search); Cache "only" allows no paid
	// search (engines.Query's fields of the same names).
	MaxAge *int   `json:"max_age,omitempty"`
	Cache  string `json:"cache,omitempty"`
}

// With is s with o merged in (Merge), s made when it is nil and o is not.
func (s *SearchOptions) With(o *SearchOptions) *SearchOptions {
	if o == nil {
		return s
	}
	if s == nil {
		s = &SearchOptions{}
	}
	s.Merge(o)
	return s
}

// Merge folds o into s: later settings win, lists and notes accumulate.
func (s *SearchOptions) Merge(o *SearchOptions) {
	if o == nil {
		return
	}
	s.Requested = s.Requested || o.Requested
	s.Fetch = s.Fetch || o.Fetch
	s.Forced = s.Forced || o.Forced
	if o.MaxFetches > 0 && (s.MaxFetches == 0 || o.MaxFetches < s.MaxFetches) {
		s.MaxFetches = o.MaxFetches
	}
	s.Engine = cmp.Or(o.Engine, s.Engine)
	if o.MaxUses > 0 && (s.MaxUses == 0 || o.MaxUses < s.MaxUses) {
		s.MaxUses = o.MaxUses
	}
	if o.MaxCostUSD > 0 && (s.MaxCostUSD == 0 || o.MaxCostUSD < s.MaxCostUSD) {
		s.MaxCostUSD = o.MaxCostUSD
	}
	if o.Count > 0 {
		s.Count = o.Count
	}
	s.Country = cmp.Or(o.Country, s.Country)
	s.ContextSize = cmp.Or(o.ContextSize, s.ContextSize)
	if o.MaxAge != nil && (s.MaxAge == nil || *o.MaxAge < *s.MaxAge) {
		s.MaxAge = o.MaxAge
	}
	s.Cache = cmp.Or(o.Cache, s.Cache)
	s.AllowedDomains = appendNew(s.AllowedDomains, o.AllowedDomains...)
	s.BlockedDomains = appendNew(s.BlockedDomains, o.BlockedDomains...)
	s.Unhonoured = appendNew(s.Unhonoured, o.Unhonoured...)
}

func appendNew(dst []string, add ...string) []string {
	for _, a := range add {
		if !slices.Contains(dst, a) {
			dst = append(dst, a)
		}
	}
	return dst
}

// contextCounts maps search_context_size onto hits per search.
var contextCounts = map[string]int{"low": 5, "medium": 10, "high": 20}

// ParseSearchSettings reads the settings of one search declaration (the object of a
// web_search tool, web_search_options, OpenRouter's parameters…). param names the
// object in errors. Known settings the fleet cannot honour, and unknown ones, become
// Unhonoured notes, never silent drops; malformed values are errors.
func ParseSearchSettings(param string, fields map[string]json.RawMessage) (*SearchOptions, error) {
	o := &SearchOptions{Requested: true}
	at := func(k string) string { return param + "." + k }
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		v := fields[k]
		if isNull(v) {
			continue
		}
		switch k {
		case "type", "name", "enable", "allowed_callers", "cache_control", "defer_loading", "strict":
			// the declaration itself, or settings with nothing to do for the fleet
		case "engine":
			if json.Unmarshal(v, &o.Engine) != nil || strings.TrimSpace(o.Engine) == "" {
				return nil, badParam(at(k), "'%s' must be a non-empty string naming one of the fleet's engines", at(k))
			}
		case "max_uses":
			if json.Unmarshal(v, &o.MaxUses) != nil || o.MaxUses < 1 {
				return nil, badParam(at(k), "'%s' must be a positive integer", at(k))
			}
		case "max_cost_usd":
			if json.Unmarshal(v, &o.MaxCostUSD) != nil || !(o.MaxCostUSD > 0 && o.MaxCostUSD <= 1e6) || o.MaxCostUSD < 1e-6 {
				return nil, badParam(at(k), "'%s' must be a positive number of US dollars (at most 1000000)", at(k))
			}
		case "max_age":
			var n int
			if json.Unmarshal(v, &n) != nil || n < 0 {
				return nil, badParam(at(k), "'%s' must be a whole number of seconds, 0 or more", at(k))
			}
			o.MaxAge = &n
		case "cache":
			if json.Unmarshal(v, &o.Cache) != nil || o.Cache != "only" {
				return nil, badParam(at(k), "'%s' must be \"only\" (answer from the cache, with no paid search)", at(k))
			}
		case "max_results", "count":
			if json.Unmarshal(v, &o.Count) != nil || o.Count < 1 || o.Count > 50 {
				return nil, badParam(at(k), "'%s' must be an integer from 1 to 50", at(k))
			}
		case "search_context_size":
			if json.Unmarshal(v, &o.ContextSize) != nil || contextCounts[o.ContextSize] == 0 {
				return nil, badParam(at(k), "'%s' must be one of low, medium, high", at(k))
			}
			o.Count = cmp.Or(o.Count, contextCounts[o.ContextSize])
		case "allowed_domains", "include_domains":
			d, err := domains(at(k), v)
			if err != nil {
				return nil, err
			}
			o.AllowedDomains = appendNew(o.AllowedDomains, d...)
		case "blocked_domains", "excluded_domains", "exclude_domains":
			d, err := domains(at(k), v)
			if err != nil {
				return nil, err
			}
			o.BlockedDomains = appendNew(o.BlockedDomains, d...)
		case "filters":
			var f map[string]json.RawMessage
			if json.Unmarshal(v, &f) != nil || f == nil {
				return nil, badParam(at(k), "'%s' must be an object", at(k))
			}
			sub, err := ParseSearchSettings(at(k), f)
			if err != nil {
				return nil, err
			}
			o.Merge(sub)
		case "user_location":
			if err := o.location(at(k), v); err != nil {
				return nil, err
			}
		case "external_web_access":
			var b bool
			if json.Unmarshal(v, &b) != nil {
				return nil, badParam(at(k), "'%s' must be a boolean", at(k))
			}
			if !b {
				o.Unhonoured = append(o.Unhonoured, at(k)+"=false is not honoured: the fleet has no cached-only index and searches the live web")
			}
		default:
			o.Unhonoured = append(o.Unhonoured, fmt.Sprintf("%s is not supported by the fleet's web search and was ignored", at(k)))
		}
	}
	return o, nil
}

func isNull(v json.RawMessage) bool { return len(v) == 0 || string(bytes.TrimSpace(v)) == "null" }

func domains(param string, v json.RawMessage) ([]string, error) {
	var ds []string
	if json.Unmarshal(v, &ds) != nil {
		return nil, badParam(param, "'%s' must be an array of domain names", param)
	}
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		d = strings.ToLower(strings.TrimSpace(d))
		if d == "" {
			return nil, badParam(param, "'%s' contains an empty domain", param)
		}
		out = append(out, d)
	}
	return out, nil
}

// location reads a user_location in the Responses / Anthropic shape ({type, city,
// region, country, timezone}) or the Chat one ({type, approximate: {…}}). The
// engines take a country; the rest is reported as not honoured.
func (o *SearchOptions) location(param string, v json.RawMessage) error {
	var loc map[string]json.RawMessage
	if json.Unmarshal(v, &loc) != nil || loc == nil {
		return badParam(param, "'%s' must be an object", param)
	}
	if a, ok := loc["approximate"]; ok && !isNull(a) {
		var inner map[string]json.RawMessage
		if json.Unmarshal(a, &inner) != nil || inner == nil {
			return badParam(param+".approximate", "'%s.approximate' must be an object", param)
		}
		maps.Copy(loc, inner)
		delete(loc, "approximate")
	}
	for _, k := range []string{"type", "city", "region", "country", "timezone"} {
		x, ok := loc[k]
		if !ok || isNull(x) {
			continue
		}
		var s string
		if json.Unmarshal(x, &s) != nil {
			return badParam(param+"."+k, "'%s.%s' must be a string", param, k)
		}
		switch k {
		case "type":
			if s != "approximate" {
				return badParam(param+".type", "'%s.type' must be \"approximate\"", param)
			}
		case "country":
			if len(s) != 2 {
				return badParam(param+".country", "'%s.country' must be a two-letter ISO 3166-1 code", param)
			}
			o.Country = strings.ToUpper(s)
		default:
			if s != "" {
				o.Unhonoured = append(o.Unhonoured, fmt.Sprintf("%s.%s (%q) is not honoured: the fleet's engines take a country only", param, k, s))
			}
		}
		delete(loc, k)
	}
	for k := range loc {
		o.Unhonoured = append(o.Unhonoured, fmt.Sprintf("%s.%s is not supported and was ignored", param, k))
	}
	return nil
}

// chatSearchTool reads one entry of a Chat request's tools. It reports whether the
// entry declares the fleet's web search rather than a client function, in any of the
// forms the fleet accepts:
//
//	{"type":"web_search", …settings}            the fleet's own (settings flat or under "web_search")
//	{"type":"openrouter:web_search","parameters":{…}}  OpenRouter's server tool
//	{"googleSearch":{}} / {"google_search":{}} / {"type":"google_search"}  Gemini style
//	{"type":"builtin_function","function":{"name":"$web_search"}}  Kimi
func chatSearchTool(param string, raw json.RawMessage) (bool, *SearchOptions, error) {
	var t map[string]json.RawMessage
	if json.Unmarshal(raw, &t) != nil || t == nil {
		return false, nil, nil // not an object: the function-tool check reports it
	}
	var typ string
	json.Unmarshal(t["type"], &typ) // absent: ""
	settings := func(key string) (*SearchOptions, error) {
		if inner, ok := t[key]; ok && !isNull(inner) {
			var fields map[string]json.RawMessage // fresh: decoding into t would merge the two
			if json.Unmarshal(inner, &fields) != nil || fields == nil {
				return nil, badParam(param+"."+key, "'%s.%s' must be an object", param, key)
			}
			return ParseSearchSettings(param+"."+key, fields)
		}
		return ParseSearchSettings(param, t)
	}
	switch typ {
	case "web_search", "web_search_preview":
		o, err := settings("web_search")
		return true, o, err
	case "openrouter:web_search":
		o, err := settings("parameters")
		return true, o, err
	case "google_search", "googleSearch":
		return true, &SearchOptions{Requested: true}, nil
	case "builtin_function":
		var fn struct {
			Name string `json:"name"`
		}
		json.Unmarshal(t["function"], &fn)
		if fn.Name == "$web_search" {
			return true, &SearchOptions{Requested: true}, nil
		}
		return false, nil, badParam(param, "%s: builtin_function %q is not supported; the fleet serves $web_search only", param, fn.Name)
	case "":
		for _, k := range []string{"googleSearch", "google_search", "googleSearchRetrieval"} {
			if _, ok := t[k]; ok {
				return true, &SearchOptions{Requested: true}, nil
			}
		}
	}
	return false, nil, nil
}

// chatSearchOptions reads web_search_options: "search for this request".
func chatSearchOptions(v json.RawMessage) (*SearchOptions, error) {
	if isNull(v) {
		return nil, nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(v, &fields) != nil || fields == nil {
		return nil, badParam("web_search_options", "'web_search_options' must be an object")
	}
	return ParseSearchSettings("web_search_options", fields)
}
