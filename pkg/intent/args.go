package intent

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/engines"
)

// Error types of a rejected web_search call, as the model reads them in
// Citation.Error.Type. The first two are seed 003's.
const (
	// InvalidToolArguments: the arguments are not a JSON object, have unknown keys,
	// or a field other than query and engine is invalid.
	InvalidToolArguments = "INVALID_TOOL_ARGUMENTS"
	// InvalidQuery: the query is missing, not a string, empty or too long.
	InvalidQuery = "INVALID_QUERY"
	// InvalidEngine: the engine is not one of the ids offered.
	InvalidEngine = "INVALID_ENGINE"
	// EngineRequired: several engines, none the default, and the call named none.
	EngineRequired = "ENGINE_REQUIRED"
)

// Call is a validated web_search call.
type Call struct {
	// Engine is the id of the engine to run the search on.
	Engine string
	// Choice says how Engine was chosen: ChoiceModel, ChoiceDefault, or
	// ChoiceLanguage plus the query's language.
	Choice string
	// Query is the search, checked by engines.CheckQuery: trimmed query, recency
	// and count with their defaults filled in (noLimit, engines.DefaultCount),
	// domains as lower-case host names.
	Query engines.Query
}

// ArgError is a rejected web_search call: what the model is told so it can call
// again correctly. It is a normal outcome of a model's mistake, not a failure of the
// fleet.
type ArgError struct {
	// Type is one of InvalidToolArguments, InvalidQuery, InvalidEngine,
	// EngineRequired.
	Type string
	// Display is a short line for people (Citation.ReturnDisplay).
	Display string
	// Details says what was wrong and how to fix it, for the model.
	Details string
}

// Error makes ArgError usable as an error in logs.
func (e *ArgError) Error() string { return e.Type + ": " + e.Details }

// Result is the tool result the model reads for the rejected call (seed 003's error
// shape).
func (e *ArgError) Result() *engines.Result {
	return engines.InvalidArgumentsResult(e.Type, e.Display, e.Details)
}

// acceptedKeys are the argument names of the tool schema, in its order, then those
// of the search's freshness and strictness (args_freshness.go).
var acceptedKeys = [...]string{"query", "engine", "recency", "count", "allowed_domains", "blocked_domains", "max_age", "cache", "strict"}

// acceptedList is acceptedKeys as the seed's error wording lists them.
var acceptedList = "'" + strings.Join(acceptedKeys[:], "', '") + "'"

// Parse validates the arguments string of a web_search call and chooses its engine.
// googlePreferred must be the classifier's verdict for the request that offered the
// tool, so the engines accepted are the ones the tool listed.
//
// Checks, in order (the first failure is reported): the arguments are one JSON
// object (empty arguments count as {}, and an object encoded twice as a JSON string
// is unwrapped: some models do that) of at most MaxArgumentsBytes; no unknown keys;
// query is a non-empty string of at most MaxQueryChars characters; engine, when
// given, is an offered id (exact, else the one id equal ignoring case); recency is one
// of the schema's values (ignoring case); count is an integral JSON number in
// 1..engines.MaxCount — 5 and 5.0 are accepted, the string "5" is not, as the schema
// says integer; the domain lists are arrays of at most MaxDomains host names (a full
// http(s) URL counts as its host). A null field counts as absent, and so does an
// empty engine or recency string.
//
// The engine is the one named, else the only engine offered, else the default, else
// the call is rejected with EngineRequired, listing the ids and their descriptions; an
// engine the fleet chose is chosen again when it would weaken an option of the search
// (Route).
func (t *Toolset) Parse(arguments string, googlePreferred bool) (Call, *ArgError) {
	v := t.view(googlePreferred)
	fields, e := decodeObject(arguments)
	if e != nil {
		return Call{}, e
	}
	if e := unknownKeys(fields); e != nil {
		return Call{}, e
	}
	var q engines.Query
	if q.Query, e = parseQuery(fields["query"]); e != nil {
		return Call{}, e
	}
	engine, e := v.parseEngine(fields["engine"])
	if e != nil {
		return Call{}, e
	}
	if q.Recency, e = parseRecency(fields["recency"]); e != nil {
		return Call{}, e
	}
	if q.Count, e = parseCount(fields["count"]); e != nil {
		return Call{}, e
	}
	if q.AllowedDomains, e = parseDomains("allowed_domains", fields["allowed_domains"]); e != nil {
		return Call{}, e
	}
	if q.BlockedDomains, e = parseDomains("blocked_domains", fields["blocked_domains"]); e != nil {
		return Call{}, e
	}
	if e = parseFreshness(&q, fields); e != nil {
		return Call{}, e
	}
	choice := ChoiceModel
	if engine == "" {
		if engine, choice = v.chooseEngine(q.Query); engine == "" {
			return Call{}, &ArgError{
				Type:    EngineRequired,
				Display: "web_search needs an engine.",
				Details: "Several search engines are configured and none is the default: call web_search again with 'engine' set to one of: " + v.listing + ".",
			}
		}
	}
	checked, err := engines.CheckQuery(q)
	if err != nil { // a safety net: the checks above are stricter
		return Call{}, argsError("web_search arguments are invalid.", err.Error()+".")
	}
	return t.Route(Call{Engine: engine, Choice: choice, Query: checked}, googlePreferred), nil
}

func argsError(display, details string) *ArgError {
	return &ArgError{Type: InvalidToolArguments, Display: display, Details: details}
}

// decodeObject decodes the arguments into their fields, undecoded.
func decodeObject(arguments string) (map[string]json.RawMessage, *ArgError) {
	if len(arguments) > MaxArgumentsBytes {
		return nil, argsError("web_search arguments are too large.",
			fmt.Sprintf("The arguments are %d bytes long, at most %d are accepted: send a short query.", len(arguments), MaxArgumentsBytes))
	}
	raw := strings.TrimSpace(arguments)
	if raw == "" {
		raw = "{}"
	}
	if raw[0] == '"' {
		// {"query": …} encoded once more as a JSON string.
		var inner string
		if json.Unmarshal([]byte(raw), &inner) == nil && strings.HasPrefix(strings.TrimSpace(inner), "{") {
			raw = strings.TrimSpace(inner)
		}
	}
	const example = `send a JSON object such as {"query": "latest Go release"}.`
	if raw[0] != '{' {
		return nil, argsError("web_search arguments must be a JSON object.", "The arguments are not a JSON object: "+example)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &fields); err != nil {
		return nil, argsError("web_search arguments must be a JSON object.",
			"The arguments are not valid JSON ("+clip(err.Error(), 120)+"): "+example)
	}
	return fields, nil
}

func unknownKeys(fields map[string]json.RawMessage) *ArgError {
	var unknown []string
	for k := range fields {
		if !slices.Contains(acceptedKeys[:], k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	const maxListed = 10
	more := ""
	if len(unknown) > maxListed {
		more = fmt.Sprintf(" (and %d more)", len(unknown)-maxListed)
		unknown = unknown[:maxListed]
	}
	for i, k := range unknown {
		unknown[i] = clip(k, 40)
	}
	return argsError("web_search got unknown arguments.",
		"Unknown argument(s): "+strings.Join(unknown, ", ")+more+", only "+acceptedList+" supported.")
}

// absent reports whether a field is missing or null.
func absent(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

func parseQuery(raw json.RawMessage) (string, *ArgError) {
	const display = "web_search needs a non-empty 'query'."
	if absent(raw) {
		return "", &ArgError{Type: InvalidQuery, Display: display, Details: "Missing 'query': pass the search text as a string."}
	}
	var q string
	if json.Unmarshal(raw, &q) != nil {
		return "", &ArgError{Type: InvalidQuery, Display: display, Details: "'query' must be a string, not " + clip(string(raw), 40) + "."}
	}
	q = strings.TrimSpace(q)
	if q == "" {
		return "", &ArgError{Type: InvalidQuery, Display: display, Details: "'query' is empty: pass the search text."}
	}
	if n := utf8.RuneCountInString(q); n > MaxQueryChars {
		return "", &ArgError{Type: InvalidQuery, Display: "web_search 'query' is too long.",
			Details: fmt.Sprintf("'query' is %d characters long, at most %d are accepted: send a short search query, not a document.", n, MaxQueryChars)}
	}
	return q, nil
}

// parseEngine returns the engine named by the call, or "" when it names none.
func (v *view) parseEngine(raw json.RawMessage) (string, *ArgError) {
	if absent(raw) {
		return "", nil
	}
	var name string
	if json.Unmarshal(raw, &name) != nil {
		return "", &ArgError{Type: InvalidEngine, Display: "web_search got an invalid engine.",
			Details: "'engine' must be a string, one of: " + v.listing + "."}
	}
	name = strings.TrimSpace(name)
	if name == "" {
		return "", nil
	}
	var folded []string
	for _, e := range v.engines {
		if e.ID == name {
			return e.ID, nil
		}
		if strings.EqualFold(e.ID, name) {
			folded = append(folded, e.ID)
		}
	}
	if len(folded) == 1 {
		return folded[0], nil
	}
	return "", &ArgError{Type: InvalidEngine, Display: "web_search got an unknown engine.",
		Details: fmt.Sprintf("Unknown engine %q: use one of: %s.", clip(name, 40), v.listing)}
}

var recencies = [...]engines.Recency{engines.OneDay, engines.OneWeek, engines.OneMonth, engines.OneYear, engines.NoLimit}

func parseRecency(raw json.RawMessage) (engines.Recency, *ArgError) {
	if absent(raw) {
		return "", nil
	}
	const want = "'recency' must be one of oneDay, oneWeek, oneMonth, oneYear, noLimit"
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", argsError("web_search got an invalid 'recency'.", want+", not "+clip(string(raw), 40)+".")
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return "", nil
	}
	for _, r := range recencies {
		if strings.EqualFold(s, string(r)) {
			return r, nil
		}
	}
	return "", argsError("web_search got an invalid 'recency'.", fmt.Sprintf("%s, not %q.", want, clip(s, 40)))
}

func parseCount(raw json.RawMessage) (int, *ArgError) {
	if absent(raw) {
		return 0, nil
	}
	want := fmt.Sprintf("'count' must be an integer from 1 to %d", engines.MaxCount)
	bad := func(why string) (int, *ArgError) {
		return 0, argsError("web_search got an invalid 'count'.", want+", "+why+".")
	}
	s := string(raw)
	if s[0] == '"' {
		return bad("as a JSON number, not the string " + clip(s, 20))
	}
	// raw is valid JSON, so ParseFloat reads only a number: true, an object or an
	// array fail, and so does a number too large for a float64 (ErrRange).
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || f < 1 || f > engines.MaxCount {
		return bad("not " + clip(s, 20))
	}
	return int(f), nil
}

func parseDomains(key string, raw json.RawMessage) ([]string, *ArgError) {
	if absent(raw) {
		return nil, nil
	}
	display := "web_search got an invalid '" + key + "'."
	want := "'" + key + "' must be an array of host names such as [\"reuters.com\"]"
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return nil, argsError(display, want+", not "+clip(string(raw), 40)+".")
	}
	if len(list) > MaxDomains {
		return nil, argsError(display, fmt.Sprintf("%s, at most %d of them (got %d).", want, MaxDomains, len(list)))
	}
	out := make([]string, 0, len(list))
	for _, item := range list {
		var d string
		if json.Unmarshal(item, &d) != nil {
			return nil, argsError(display, want+"; "+clip(string(item), 40)+" is not a string.")
		}
		host, ok := hostName(d)
		if !ok {
			return nil, argsError(display, fmt.Sprintf("%s; %q is not a host name.", want, clip(d, 60)))
		}
		if !slices.Contains(out, host) {
			out = append(out, host)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// hostName returns d as a lower-case host name: "Reuters.com", "www.bbc.co.uk.",
// "*.example.org" and "https://example.com/path" are accepted (a URL counts as its
// host); "example.com/path", "user@host", "host:8080" and anything with spaces are
// not. Labels are 1-63 letters, digits or hyphens, not starting or ending with a
// hyphen; letters may be non-ASCII (internationalized names, unencoded).
func hostName(d string) (string, bool) {
	d = strings.ToLower(strings.TrimSpace(d))
	if strings.HasPrefix(d, "http://") || strings.HasPrefix(d, "https://") {
		u, err := url.Parse(d)
		if err != nil || u.Host == "" || u.Port() != "" || u.User != nil {
			return "", false
		}
		d = u.Hostname()
	}
	d = strings.TrimPrefix(d, "*.")
	d = strings.TrimSuffix(d, ".")
	if d == "" || len(d) > 253 {
		return "", false
	}
	for label := range strings.SplitSeq(d, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "", false
		}
		for _, r := range label {
			if r != '-' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
				return "", false
			}
		}
	}
	return d, true
}

// clip makes model output safe to echo back: invalid UTF-8 (raw JSON values keep the
// model's bytes) becomes U+FFFD, and the text is cut to at most n bytes on a rune
// boundary, marking the cut.
func clip(s string, n int) string { return redact.Truncate(strings.ToValidUTF8(s, "\uFFFD"), n) }
