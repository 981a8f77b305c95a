package engines

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/llm"
	geminiapi "github.com/searchfleet/searchfleet/pkg/llm/gemini"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// gemini is Google's Gemini generateContent API with Google Search grounding, an
// adapter over the Gemini model codec (pkg/llm/gemini, grounded.go): the model
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
	if err := optionsOf(cfg, &opts); err != nil {
		return nil, err
	}
	model := cmp.Or(strings.TrimPrefix(strings.TrimSpace(cfg.Model), "models/"), "gemini-2.5-flash")
	if !geminiNameRE.MatchString(model) {
		return nil, fmt.Errorf("engine %q: model %q is not a Gemini model name", cfg.ID, model)
	}
	cfg.Model = model
	var api wire.ModelAPI = geminiapi.Model
	base := "https://generativelanguage.googleapis.com"
	if v := opts.Vertex; v != nil {
		loc := cmp.Or(v.Location, "us-central1")
		if !geminiNameRE.MatchString(v.Project) || !geminiNameRE.MatchString(loc) {
			return nil, fmt.Errorf("engine %q: options.vertex needs a project and a location made of letters, digits, '.', '_' or '-'", cfg.ID)
		}
		base = "https://" + loc + "-aiplatform.googleapis.com"
		if loc == "global" {
			base = "https://aiplatform.googleapis.com"
		}
		api = geminiVertex{ModelAPI: geminiapi.Model, path: "/v1/projects/" + url.PathEscape(v.Project) + "/locations/" + url.PathEscape(loc) +
			"/publishers/google/models/" + model + ":generateContent"}
	}
	e := &gemini{perQuery: strings.HasPrefix(model, "gemini-3")}
	e.grounded = newGrounded(cfg, hc, api, base, "", model, "Gemini", e)
	e.price = priceOf(cfg, 0.035)
	if e.perQuery {
		e.price = priceOf(cfg, 0.014)
	}
	return e, nil
}

func (e *gemini) searchOptions(Query) (*llm.SearchOptions, int) { return &llm.SearchOptions{}, 0 }

// result reads a grounded answer: the pages of its searches as hits and sources, its
// citations as markers, its queries as the billed searches.
func (e *gemini) result(_ Query, a *wire.Response) (*Result, error) {
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
		res.partialf("Gemini stopped the answer early (finish reason %s); it may be incomplete", a.StopDetail)
	case "MAX_TOKENS":
		res.partialf("Gemini's answer was cut off at its token limit")
	}
	var p pages
	var m marks
	off := 0
	for _, part := range a.Content {
		switch part.Kind {
		case wire.PartServerCall:
			res.Usage.Searches++
		case wire.PartServerResult:
			for _, s := range part.Search.Sources {
				p.add(geminiHit(s.URL, s.Title))
			}
		case wire.PartText:
			for _, c := range part.Citations {
				if c.URL != "" { // c.End counts characters
					m.add(off+CharToByte(part.Text, c.End), p.add(geminiHit(c.URL, c.Title)))
				}
			}
			off += len(part.Text)
		}
	}
	res.Summary = m.into(answer)
	res.Citation.Sources, res.Hits = sourcesOf(p.hits), p.hits
	switch {
	case e.perQuery:
		res.Usage.CostUSD = e.price * float64(res.Usage.Searches)
	case res.Usage.Searches > 0 || len(res.Hits) > 0:
		res.Usage.CostUSD = e.price
	}
	return res, nil
}

// geminiHit is a page of Google's grounding. Titles are usually the publisher's bare
// domain ("weather.gov") while the URI is a vertexaisearch.cloud.google.com redirect:
// the title names the site.
func geminiHit(uri, title string) Hit {
	h := Hit{Title: title, URL: uri}
	if t := strings.TrimSpace(title); t != "" && !strings.ContainsAny(t, " /") && strings.Contains(t, ".") {
		h.Source = strings.ToLower(strings.TrimPrefix(t, "www."))
	}
	return h
}
