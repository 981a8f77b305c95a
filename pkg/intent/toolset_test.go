package intent

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// Configurations used across the tests.
var (
	oneEngine = Config{Engines: []Engine{
		{ID: "glm", ProviderKey: "glm.glm-4.7", Description: "GLM 4.7 – better for Chinese / domestic news"},
	}}
	twoEnginesDefault = Config{Engines: []Engine{
		{ID: "glm", ProviderKey: "glm.glm-4.7", Description: "GLM 4.7 – better for Chinese / domestic news", Default: true},
		{ID: "google", ProviderKey: "antigravity.geetasamodgeetasamoda.gemini-3-flash", Description: "Gemini – broader global web coverage"},
	}}
	twoEnginesNoDefault = Config{Engines: []Engine{
		{ID: "glm", ProviderKey: "glm.glm-4.7", Description: "GLM 4.7 – better for Chinese / domestic news"},
		{ID: "google", ProviderKey: "antigravity.geetasamodgeetasamoda.gemini-3-flash", Description: "Gemini – broader global web coverage"},
	}}
	// Google-backed engines by every rule of GoogleBacked, and two that are not.
	manyEngines = Config{Engines: []Engine{
		{ID: "glm", ProviderKey: "glm.glm-4.7", Description: "GLM", Default: true},
		{ID: "brave", Kind: "brave", Description: "Brave Search API"},
		{ID: "gem", Kind: "gemini"},
		{ID: "cli", ProviderKey: "gemini-cli.gemini-2.5-flash"},
		{ID: "ag", ProviderKey: "antigravity.acct.claude-x"},
		{ID: "vertex", ProviderKey: "vertex.gemini-3-flash"},
		{ID: "MyGoogle", Kind: "serper"},
	}}
	noGoogle = Config{Engines: []Engine{
		{ID: "glm", ProviderKey: "glm.glm-4.7"},
		{ID: "brave", Kind: "brave"},
	}}
)

func mustToolset(tb testing.TB, c Config) *Toolset {
	tb.Helper()
	ts, err := NewToolset(c)
	if err != nil {
		tb.Fatalf("NewToolset: %v", err)
	}
	return ts
}

// toolJSON is the decoded tool entry.
type toolJSON struct {
	Type     string `json:"type"`
	Function struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		Parameters  struct {
			Type       string `json:"type"`
			Properties map[string]struct {
				Type        string                 `json:"type"`
				Enum        []string               `json:"enum"`
				Minimum     *int                   `json:"minimum"`
				Maximum     *int                   `json:"maximum"`
				Items       *struct{ Type string } `json:"items"`
				Description string                 `json:"description"`
			} `json:"properties"`
			Required []string `json:"required"`
		} `json:"parameters"`
	} `json:"function"`
}

func decodeTool(t *testing.T, raw json.RawMessage) toolJSON {
	t.Helper()
	var tj toolJSON
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tj); err != nil {
		t.Fatalf("tool JSON %s: %v", raw, err)
	}
	return tj
}

func TestTool(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		c          Config
		google     bool
		enum       []string
		required   []string
		descHas    []string
		descHasNot []string
	}{
		{"one engine", oneEngine, false, []string{"glm"}, []string{"query"},
			[]string{"glm=GLM 4.7 – better for Chinese / domestic news", "Optional; defaults to glm"}, []string{"Required"}},
		{"one engine, google-preferred", oneEngine, true, []string{"glm"}, []string{"query"}, nil, nil},
		{"default", twoEnginesDefault, false, []string{"glm", "google"}, []string{"query"},
			[]string{"glm=GLM 4.7", "google=Gemini – broader global web coverage", "defaults to glm"}, nil},
		{"no default", twoEnginesNoDefault, false, []string{"glm", "google"}, []string{"query", "engine"},
			[]string{"glm=GLM 4.7", "google=Gemini", "Required"}, []string{"defaults"}},
		{"no default, google-preferred", twoEnginesNoDefault, true, []string{"google"}, []string{"query"},
			[]string{"google=Gemini", "defaults to google"}, []string{"glm"}},
		{"many, google-preferred", manyEngines, true, []string{"gem", "cli", "ag", "vertex", "MyGoogle"}, []string{"query", "engine"},
			[]string{"gem; cli; ag; vertex; MyGoogle.", "Required"}, []string{"glm", "brave"}},
		{"many", manyEngines, false, []string{"glm", "brave", "gem", "cli", "ag", "vertex", "MyGoogle"}, []string{"query"},
			[]string{"glm=GLM; brave=Brave Search API; gem;", "defaults to glm"}, nil},
		{"none google-backed, google-preferred", noGoogle, true, []string{"glm", "brave"}, []string{"query", "engine"}, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ts := mustToolset(t, c.c)
			tj := decodeTool(t, ts.Tool(c.google))
			if tj.Type != "function" || tj.Function.Name != "web_search" || tj.Function.Description != ToolDescription {
				t.Errorf("header: %+v", tj)
			}
			p := tj.Function.Parameters
			if p.Type != "object" {
				t.Errorf("parameters type %q", p.Type)
			}
			eng := p.Properties["engine"]
			if eng.Type != "string" || !slices.Equal(eng.Enum, c.enum) {
				t.Errorf("engine %+v, want enum %v", eng, c.enum)
			}
			if !slices.Equal(ts.IDs(c.google), c.enum) {
				t.Errorf("IDs = %v, want %v", ts.IDs(c.google), c.enum)
			}
			if !slices.Equal(p.Required, c.required) {
				t.Errorf("required %v, want %v", p.Required, c.required)
			}
			for _, s := range c.descHas {
				if !strings.Contains(eng.Description, s) {
					t.Errorf("engine description %q lacks %q", eng.Description, s)
				}
			}
			for _, s := range c.descHasNot {
				if strings.Contains(eng.Description, s) {
					t.Errorf("engine description %q has %q", eng.Description, s)
				}
			}
			if q := p.Properties["query"]; q.Type != "string" || q.Description == "" {
				t.Errorf("query %+v", q)
			}
			if r := p.Properties["recency"]; r.Type != "string" || !slices.Equal(r.Enum, []string{"oneDay", "oneWeek", "oneMonth", "oneYear", "noLimit"}) {
				t.Errorf("recency %+v", r)
			}
			if n := p.Properties["count"]; n.Type != "integer" || n.Minimum == nil || *n.Minimum != 1 || n.Maximum == nil || *n.Maximum != 50 {
				t.Errorf("count %+v", n)
			}
			for _, k := range []string{"allowed_domains", "blocked_domains"} {
				if d := p.Properties[k]; d.Type != "array" || d.Items == nil || d.Items.Type != "string" || !strings.Contains(d.Description, "host names") {
					t.Errorf("%s %+v", k, d)
				}
			}
			if a, c := p.Properties["max_age"], p.Properties["cache"]; a.Type != "integer" || a.Minimum == nil || *a.Minimum != 0 || c.Type != "string" || !slices.Equal(c.Enum, []string{"only"}) {
				t.Errorf("max_age %+v, cache %+v", a, c)
			}
			if len(p.Properties) != 8 {
				t.Errorf("%d properties", len(p.Properties))
			}
			// Parameters is the same schema.
			var params json.RawMessage
			var whole struct {
				Function struct {
					Parameters json.RawMessage `json:"parameters"`
				} `json:"function"`
			}
			if err := json.Unmarshal(ts.Tool(c.google), &whole); err != nil {
				t.Fatal(err)
			}
			params = ts.Parameters(c.google)
			if string(whole.Function.Parameters) != string(params) {
				t.Errorf("Parameters %s differs from the tool's %s", params, whole.Function.Parameters)
			}
		})
	}
}

func TestToolIsPrecomputed(t *testing.T) {
	// Not parallel: testing.AllocsPerRun refuses to run in parallel tests.
	ts := mustToolset(t, twoEnginesNoDefault)
	if n := testing.AllocsPerRun(100, func() { ts.Tool(true); ts.Tool(false) }); n != 0 {
		t.Errorf("Tool allocates %v times", n)
	}
	// Appending to the returned slice must not write into the shared JSON.
	a := ts.Tool(false)
	_ = append(a, 'x')
	if b := ts.Tool(false); b[len(b)-1] != '}' {
		t.Errorf("shared JSON modified: %s", b)
	}
	// The description is not HTML-escaped.
	if strings.Contains(string(ts.Tool(false)), `\u0026`) || !strings.Contains(string(ts.Tool(false)), "–") {
		t.Errorf("tool JSON escapes text: %s", ts.Tool(false))
	}
}

func TestShouldInject(t *testing.T) {
	t.Parallel()
	sel := mustToolset(t, oneEngine)
	always := mustToolset(t, Config{Engines: oneEngine.Engines, InjectPolicy: PolicyAlways})
	hit := Result{WebSearch: true, Rule: RuleEnHard, Match: "web search"}
	cases := []struct {
		ts     *Toolset
		r      Result
		sticky bool
		want   bool
	}{
		{sel, Result{}, false, false},
		{sel, hit, false, true},
		{sel, Result{}, true, true},
		{sel, hit, true, true},
		{always, Result{}, false, true},
		{always, hit, true, true},
	}
	for i, c := range cases {
		if got := c.ts.ShouldInject(c.r, c.sticky); got != c.want {
			t.Errorf("case %d: ShouldInject(%+v, %v) under %s = %v", i, c.r, c.sticky, c.ts.Policy(), got)
		}
	}
	if sel.Policy() != PolicySelective || always.Policy() != PolicyAlways {
		t.Errorf("policies %q %q", sel.Policy(), always.Policy())
	}
}

func TestToolsetAccessors(t *testing.T) {
	t.Parallel()
	c := Config{Engines: slices.Clone(twoEnginesDefault.Engines), Keywords: []KeywordSet{{Name: FreshnessName}}}
	ts := mustToolset(t, c)
	c.Engines[0].ID = "changed" // the toolset keeps its own copy
	es := ts.Engines()
	if len(es) != 2 || es[0].ID != "glm" || es[1].ID != "google" {
		t.Fatalf("Engines = %+v", es)
	}
	es[0].ID = "changed"
	if e, ok := ts.Engine("glm"); !ok || e.ProviderKey != "glm.glm-4.7" {
		t.Errorf("Engine(glm) = %+v, %v", e, ok)
	}
	if _, ok := ts.Engine("bing"); ok {
		t.Error("Engine(bing) found")
	}
	if r := ts.Classify("weather in Paris today"); r.Rule != "extra:freshness" {
		t.Errorf("configured freshness set: %+v", r)
	}
	if r := mustToolset(t, oneEngine).Classify("weather in Paris today"); r.WebSearch {
		t.Errorf("no sets configured: %+v", r)
	}
	if _, err := NewToolset(Config{}); err == nil {
		t.Error("NewToolset accepted no engines")
	}
}

func TestGoogleBacked(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		e    Engine
		want bool
	}{
		{Engine{ID: "g", Kind: "gemini"}, true},
		{Engine{ID: "g", ProviderKey: "gemini-cli.gemini-2.5-flash"}, true},
		{Engine{ID: "g", ProviderKey: "antigravity.acct.claude"}, true},
		{Engine{ID: "g", ProviderKey: "vertex.gemini-3-flash"}, true},
		{Engine{ID: "Google-CSE", Kind: "serper"}, true},
		{Engine{ID: "glm", ProviderKey: "glm.glm-4.7"}, false},
		{Engine{ID: "brave", Kind: "brave"}, false},
		{Engine{ID: "x", ProviderKey: "mygemini.model"}, false},
	} {
		if got := GoogleBacked(c.e); got != c.want {
			t.Errorf("GoogleBacked(%+v) = %v", c.e, got)
		}
	}
}
