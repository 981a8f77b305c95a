package engines

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// gemini is Google's Gemini generateContent API with Google Search grounding, an
// adapter over the Gemini model codec (wire.GeminiModel, grounded.go): the model
// searches, answers, and its grounding says which sentences rest on which pages; the
// codec places each citation at the end of its segment (UTF-8 byte offsets, checked
// against the segment's text).
//
// Two deployments speak the same body:
//
//   - the Gemini Developer API (default): POST {base}/v1beta/models/{model}:generateContent
//     with the API key in the x-goog-api-key header (never in the URL, where it would end
//     up in access logs); default base https://generativelanguage.googleapis.com;
//   - Vertex AI, with options {"vertex": {"project": "p", "location": "us-central1"}}:
//     POST {base}/v1/projects/{p}/locations/{l}/publishers/google/models/{model}:generateContent
//     with "Authorization: Bearer <token>", the key variable then holding an OAuth access
//     token; default base https://{location}-aiplatform.googleapis.com (the "global"
//     location is served by https://aiplatform.googleapis.com).
//
// The default model is gemini-2.5-flash, the cheapest model with search grounding.
//
// Pricing: Gemini 2.5 and older bill per grounded prompt ($35 per 1,000 beyond the free
// allotment), so the default cost is $0.035 per search that used grounding. Gemini 3
// models bill per executed search query instead ($14 per 1,000; empty queries are not
// billed), so for a gemini-3* model the default is $0.014 per query.
// CostPerSearchUSD overrides the unit price in either scheme.
//
// Filters: googleSearch has no domain, recency, count, language or country knob, so
// every filter is left to the shared normalization. A recency wish is still passed to
// the model as an instruction.
type gemini struct {
	grounded
	perQuery bool // Gemini 3 bills per search query, not per grounded prompt
}

// geminiOptions are the options of the gemini kind.
type geminiOptions struct {
	// Vertex switches to Vertex AI; nil means the Gemini Developer API.
	Vertex *struct {
		Project string `json:"project"`
		// Location is the Vertex region; empty means us-central1.
		Location string `json:"location,omitempty"`
	} `json:"vertex,omitempty"`
}

// geminiVertex is the Gemini model protocol at a Vertex AI endpoint: its path, and
// the key sent as a bearer token.
type geminiVertex struct {
	wire.ModelAPI
	path string
}

func (v geminiVertex) Path(string, bool) string { return v.path }

func (v geminiVertex) Authorize(h http.Header, key string) {
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
}

var geminiNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func newGemini(cfg Config, hc *http.Client) (Engine, error) {
	var opts geminiOptions
	if err := cfg.options(&opts); err != nil {
		return nil, err
	}
	model := strings.TrimPrefix(strings.TrimSpace(cfg.Model), "models/")
	if model == "" {
		model = "gemini-2.5-flash"
	}
	if !geminiNameRE.MatchString(model) {
		return nil, fmt.Errorf("engine %q: model %q is not a Gemini model name", cfg.ID, model)
	}
	cfg.Model = model
	var api wire.ModelAPI = wire.GeminiModel
	base := "https://generativelanguage.googleapis.com"
	if v := opts.Vertex; v != nil {
		loc := v.Location
		if loc == "" {
			loc = "us-central1"
		}
		if !geminiNameRE.MatchString(v.Project) || !geminiNameRE.MatchString(loc) {
			return nil, fmt.Errorf("engine %q: options.vertex needs a project and a location made of letters, digits, '.', '_' or '-'", cfg.ID)
		}
		base = "https://" + loc + "-aiplatform.googleapis.com"
		if loc == "global" {
			base = "https://aiplatform.googleapis.com"
		}
		api = geminiVertex{ModelAPI: wire.GeminiModel, path: "/v1/projects/" + url.PathEscape(v.Project) + "/locations/" + url.PathEscape(loc) +
			"/publishers/google/models/" + model + ":generateContent"}
	}
	e := &gemini{grounded: newGrounded(cfg, hc, api, base, "", model), perQuery: strings.HasPrefix(model, "gemini-3")}
	if e.perQuery {
		e.price = cfg.price(0.014)
	} else {
		e.price = cfg.price(0.035)
	}
	return e, nil
}

// Capabilities: none; see the type's comment.
func (e *gemini) Capabilities() Capabilities { return Capabilities{} }

func (e *gemini) Search(ctx context.Context, q Query) (*Result, error) {
	answer, err := e.ask(ctx, q, &llm.SearchOptions{}, 0)
	if err != nil {
		// The Developer API answers a wrong key with 400 INVALID_ARGUMENT
		// (reason API_KEY_INVALID); that is an auth failure, not a bad query.
		var ee *Error
		if errors.As(err, &ee) && ee.Kind == BadRequest &&
			(strings.Contains(ee.Message, "API key not valid") || strings.Contains(ee.Message, "API_KEY_INVALID")) {
			ee.Kind = Auth
		}
		return nil, err
	}
	return e.result(answer)
}

func (e *gemini) parse(_ Query, bodies [][]byte) (*Result, error) {
	answer, err := e.decodeAll(bodies[:min(len(bodies), 1)])
	if err != nil {
		return nil, err
	}
	return e.result(answer)
}

// result reads a grounded answer: the pages of its searches as hits and sources, its
// citations as markers, its queries as the billed searches.
func (e *gemini) result(a *wire.Response) (*Result, error) {
	if reason, ok := strings.CutPrefix(a.StopDetail, "blocked: "); ok {
		return nil, &Error{Kind: BadRequest, Engine: e.id, Message: "Gemini blocked the query (" + reason + ")"}
	}
	answer := a.Text()
	res := &Result{Usage: Usage{InputTokens: a.Usage.InputTokens, OutputTokens: a.Usage.OutputTokens}}
	switch a.StopDetail {
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY":
		if strings.TrimSpace(answer) == "" {
			return nil, &Error{Kind: BadRequest, Engine: e.id,
				Message: "Gemini withheld the answer (finish reason " + a.StopDetail + "); rephrase the query"}
		}
		res.warnf("Gemini stopped the answer early (finish reason %s); it may be incomplete", a.StopDetail)
	case "MAX_TOKENS":
		res.warnf("Gemini's answer was cut off at its token limit")
	}
	number := map[string]int{}
	page := func(uri, title string) int {
		if n, ok := number[uri]; ok {
			return n
		}
		res.Citation.Sources = append(res.Citation.Sources, Source{Web: Web{Title: title, URI: uri}})
		number[uri] = len(res.Citation.Sources)
		h := Hit{Title: title, URL: uri}
		// Titles are usually the publisher's bare domain ("weather.gov") while the URI
		// is a vertexaisearch.cloud.google.com redirect: the title names the site.
		if t := strings.TrimSpace(title); t != "" && !strings.ContainsAny(t, " /") && strings.Contains(t, ".") {
			h.Source = strings.ToLower(strings.TrimPrefix(t, "www."))
		}
		res.Hits = append(res.Hits, h)
		return len(res.Citation.Sources)
	}
	var ins []Insert
	var nums [][]int
	at := map[int]int{} // byte offset -> index in ins
	off := 0
	for _, p := range a.Content {
		switch p.Kind {
		case wire.PartServerCall:
			res.Usage.Searches++
		case wire.PartServerResult:
			for _, s := range p.Search.Sources {
				page(s.URL, s.Title)
			}
		case wire.PartText:
			for _, c := range p.Citations {
				if c.URL == "" {
					continue
				}
				end := off + len(string([]rune(p.Text)[:min(max(c.End, 0), utf8.RuneCountInString(p.Text))]))
				i, ok := at[end]
				if !ok {
					i, at[end] = len(ins), len(ins)
					ins, nums = append(ins, Insert{Offset: end}), append(nums, nil)
				}
				nums[i] = append(nums[i], page(c.URL, c.Title))
			}
			off += len(p.Text)
		}
	}
	for i := range ins {
		ins[i].Text = MarkerText(nums[i])
	}
	res.Summary = groundedAInsert(answer, ins)
	switch {
	case e.perQuery:
		res.Usage.CostUSD = e.price * float64(res.Usage.Searches)
	case res.Usage.Searches > 0 || len(res.Hits) > 0:
		res.Usage.CostUSD = e.price
	}
	return res, nil
}
