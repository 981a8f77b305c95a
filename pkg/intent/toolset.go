package intent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/engines"
)

// ToolName is the name of the server-side tool, as the main model sees and calls it.
const ToolName = "web_search"

// ToolDescription is the web_search function description shown to the main model.
const ToolDescription = "Search the web for current information: news, facts, prices, documentation and other web pages, using the configured search engines. Returns a summary with numbered sources; cite them as [n]."

// Argument limits. The query limit keeps a model from pasting a whole document into a
// search box (search engines truncate or reject long queries anyway); the domain
// limit is more than any engine applies natively; the arguments limit bounds the
// work Parse does on a runaway model output.
const (
	MaxQueryChars     = 1000
	MaxDomains        = 20
	MaxArgumentsBytes = 32 << 10
)

// Toolset is the web_search tool of one configuration: the schema the main model is
// offered, the policy that decides when it is offered, the classifier, and the
// validation of the model's calls. It is immutable and safe for concurrent use; build
// it once per configuration with NewToolset.
//
// Sticky rule (seed 000, "Sticky Behaviour"). Within one call chain — the client's
// request, the model's tool calls, the resumed calls with their results, retries — the
// chain becomes sticky as soon as the classifier detects web search intent or the
// model calls web_search, and every later main-model call of the chain is offered the
// tool even if the latest user text no longer asks for a search (a resumed hop has
// the same user text, and a model that searched once may need to search again). The
// flag is reset when the chain's final assistant answer has finish_reason "stop"; the
// next user turn starts afresh from the classifier and the policy. The chat worker
// stores the flag with the chain state (Redis) and passes it to ShouldInject.
type Toolset struct {
	engines    []Engine
	policy     string
	classifier *Classifier
	all        view // every engine
	google     view // the Google-backed engines, or every engine when there are none
}

// view is the tool as offered in one mode: the engines shown, the engine used when a
// call names none, and the precomputed JSON.
type view struct {
	engines []Engine
	def     string // "" when the model must name the engine
	listing string // "glm (GLM 4.7 – …), google (Gemini – …)", for error messages
	tool    json.RawMessage
	params  json.RawMessage
}

// NewToolset checks c (everything Validate checks except membership in
// routing.web_search, which the caller checks with Validate) and precomputes the tool
// JSON for both modes.
func NewToolset(c Config) (*Toolset, error) {
	if err := c.validate(nil, false); err != nil {
		return nil, err
	}
	t := &Toolset{
		engines:    slices.Clone(c.Engines),
		policy:     c.policy(),
		classifier: NewClassifier(slices.Clone(c.Keywords)...),
	}
	var err error
	if t.all, err = newView(t.engines); err != nil {
		return nil, err
	}
	var google []Engine
	for _, e := range t.engines {
		if GoogleBacked(e) {
			google = append(google, e)
		}
	}
	if len(google) == 0 || len(google) == len(t.engines) {
		t.google = t.all
	} else if t.google, err = newView(google); err != nil {
		return nil, err
	}
	return t, nil
}

func newView(es []Engine) (view, error) {
	v := view{engines: es}
	if len(es) == 1 {
		v.def = es[0].ID
	} else {
		for _, e := range es {
			if e.Default {
				v.def = e.ID
			}
		}
	}
	items := make([]string, len(es))
	for i, e := range es {
		items[i] = e.ID
		if d := oneLine(e.Description); d != "" {
			items[i] += " (" + d + ")"
		}
	}
	v.listing = strings.Join(items, ", ")

	params, err := marshal(v.parameters())
	if err != nil {
		return view{}, err
	}
	v.params = params
	tool := struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}{Type: "function"}
	tool.Function.Name = ToolName
	tool.Function.Description = ToolDescription
	tool.Function.Parameters = params
	if v.tool, err = marshal(tool); err != nil {
		return view{}, err
	}
	return v, nil
}

// schema is the subset of JSON Schema the tool uses. It stays within what every
// provider's function-calling accepts (no additionalProperties, no maxLength):
// Parse enforces the rest and tells the model.
type schema struct {
	Type        string   `json:"type"`
	Enum        []string `json:"enum,omitempty"`
	Minimum     *int     `json:"minimum,omitempty"`
	Maximum     *int     `json:"maximum,omitempty"`
	Items       *schema  `json:"items,omitempty"`
	Description string   `json:"description,omitempty"`
}

// parameters is the tool's parameters schema, properties in the seed's order.
type parameters struct {
	Type       string `json:"type"`
	Properties struct {
		Engine         schema `json:"engine"`
		Query          schema `json:"query"`
		Recency        schema `json:"recency"`
		Count          schema `json:"count"`
		AllowedDomains schema `json:"allowed_domains"`
		BlockedDomains schema `json:"blocked_domains"`
		MaxAge         schema `json:"max_age"`
		Cache          schema `json:"cache"`
	} `json:"properties"`
	Required []string `json:"required"`
}

func (v *view) parameters() parameters {
	p := parameters{Type: "object", Required: []string{"query"}}
	pairs := make([]string, len(v.engines))
	ids := make([]string, len(v.engines))
	for i, e := range v.engines {
		ids[i] = e.ID
		pairs[i] = e.ID
		if d := oneLine(e.Description); d != "" {
			pairs[i] += "=" + d
		}
	}
	desc := "Search engine id: " + strings.Join(pairs, "; ") + "."
	if v.def != "" {
		desc += " Optional; defaults to " + v.def + "."
	} else {
		desc += " Required: choose the engine that best fits the query."
		p.Required = append(p.Required, "engine")
	}
	p.Properties.Engine = schema{Type: "string", Enum: ids, Description: desc}
	p.Properties.Query = schema{Type: "string", Description: fmt.Sprintf("Search query or user question (at most %d characters).", MaxQueryChars)}
	p.Properties.Recency = schema{
		Type:        "string",
		Enum:        []string{string(engines.OneDay), string(engines.OneWeek), string(engines.OneMonth), string(engines.OneYear), string(engines.NoLimit)},
		Description: "Time range filter; maps to backend-specific recency options. Defaults to noLimit.",
	}
	lo, hi := 1, engines.MaxCount
	p.Properties.Count = schema{Type: "integer", Minimum: &lo, Maximum: &hi, Description: fmt.Sprintf("Number of results to retrieve. Defaults to %d.", engines.DefaultCount)}
	p.Properties.AllowedDomains = schema{
		Type:        "array",
		Items:       &schema{Type: "string"},
		Description: fmt.Sprintf("Only return results from these host names and their subdomains, e.g. [\"reuters.com\"]. At most %d.", MaxDomains),
	}
	p.Properties.BlockedDomains = schema{
		Type:        "array",
		Items:       &schema{Type: "string"},
		Description: fmt.Sprintf("Never return results from these host names and their subdomains. At most %d.", MaxDomains),
	}
	zero := 0
	p.Properties.MaxAge = schema{Type: "integer", Minimum: &zero, Description: "How old, in seconds, a cached result of this same search may be; 0 searches afresh. Defaults to what the cache keeps."}
	p.Properties.Cache = schema{Type: "string", Enum: []string{engines.CacheOnly}, Description: "\"only\": answer from the cache or say nothing is cached, without a new search."}
	return p
}

// marshal encodes v without HTML escaping (descriptions may contain "&" and "<", and
// the model reads them).
func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return json.RawMessage(bytes.TrimRight(b.Bytes(), "\n")), nil
}

// oneLine collapses white space runs (newlines included) into single spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func (t *Toolset) view(googlePreferred bool) *view {
	if googlePreferred {
		return &t.google
	}
	return &t.all
}

// Tool returns the OpenAI chat tools[] entry for web_search:
// {"type":"function","function":{"name":"web_search","description":…,"parameters":…}}.
// When googlePreferred, the engine enum lists only the Google-backed engines (see
// GoogleBacked), or every engine when none is. The JSON is computed once by
// NewToolset: it is sent on every main-model call. Callers must not modify it
// (appending copies).
func (t *Toolset) Tool(googlePreferred bool) json.RawMessage {
	b := t.view(googlePreferred).tool
	return b[:len(b):len(b)]
}

// Parameters returns the tool's parameters JSON Schema alone, for protocol adapters
// that wrap it their own way (Responses API function tools, Anthropic input_schema).
// Callers must not modify it.
func (t *Toolset) Parameters(googlePreferred bool) json.RawMessage {
	b := t.view(googlePreferred).params
	return b[:len(b):len(b)]
}

// ShouldInject reports whether to offer web_search on this main-model call: always
// under PolicyAlways; under PolicySelective when the classifier found web search
// intent in the latest user message (r.WebSearch) or the chain is sticky (see
// Toolset for the sticky rule).
func (t *Toolset) ShouldInject(r Result, sticky bool) bool {
	return t.policy == PolicyAlways || r.WebSearch || sticky
}

// Classify classifies text with the configured opt-in keyword sets.
func (t *Toolset) Classify(text string) Result { return t.classifier.Classify(text) }

// Policy returns the injection policy: PolicySelective or PolicyAlways.
func (t *Toolset) Policy() string { return t.policy }

// Engines returns the configured engines, in configuration order.
func (t *Toolset) Engines() []Engine { return slices.Clone(t.engines) }

// IDs returns the engine ids offered in the given mode, in configuration order.
func (t *Toolset) IDs(googlePreferred bool) []string {
	v := t.view(googlePreferred)
	ids := make([]string, len(v.engines))
	for i, e := range v.engines {
		ids[i] = e.ID
	}
	return ids
}

// Engine returns the configured engine with this id.
func (t *Toolset) Engine(id string) (Engine, bool) {
	for _, e := range t.engines {
		if e.ID == id {
			return e, true
		}
	}
	return Engine{}, false
}
