package intent

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	route := []string{"glm.glm-4.7", "antigravity.geetasamodgeetasamoda.gemini-3-flash"}
	cases := []struct {
		name  string
		c     Config
		route []string
		errs  []string // substrings, one per expected problem
	}{
		{"seed config", twoEnginesDefault, route, nil},
		{"kind only", Config{Engines: []Engine{{ID: "brave", Kind: "brave"}}, InjectPolicy: "always"}, nil, nil},
		{"freshness without keywords", Config{Engines: oneEngine.Engines, Keywords: []KeywordSet{{Name: "freshness"}, {Name: "zh", Keywords: []string{"天气"}}}}, route, nil},
		{"no engines", Config{}, route, []string{"webSearch.engines: at least one engine is required"}},
		{"bad id", Config{Engines: []Engine{{ID: "glm", Kind: "brave"}, {ID: "has space", Kind: "brave"}}}, route,
			[]string{`webSearch.engines[1].id: "has space" is not a valid engine id`}},
		{"empty id", Config{Engines: []Engine{{Kind: "brave"}}}, route, []string{`webSearch.engines[0].id: "" is not a valid engine id`}},
		{"duplicate id", Config{Engines: []Engine{{ID: "glm", Kind: "brave"}, {ID: "x", Kind: "brave"}, {ID: "glm", Kind: "tavily"}}}, route,
			[]string{`webSearch.engines[2].id: "glm" is already the id of webSearch.engines[0]`}},
		{"two defaults", Config{Engines: []Engine{{ID: "a", Kind: "brave", Default: true}, {ID: "b", Kind: "brave", Default: true}}}, route,
			[]string{`webSearch.engines[1].default: only one engine can be the default; webSearch.engines[0] ("a") already is`}},
		{"no backend", Config{Engines: []Engine{{ID: "a"}}}, route, []string{`webSearch.engines[0]: engine "a" needs a providerKey`}},
		{"unknown kind", Config{Engines: []Engine{{ID: "a", Kind: "bing"}}}, route, []string{`webSearch.engines[0].kind: unknown engine kind "bing" (known: anthropic, brave,`}},
		{"not in route", Config{Engines: []Engine{{ID: "glm", ProviderKey: "glm.glm-4.7"}, {ID: "google", ProviderKey: "antigravity.x.gemini-3-flash"}}}, route,
			[]string{`webSearch.engines[1].providerKey: engine "google" uses "antigravity.x.gemini-3-flash", which is not a target of routing.web_search (glm.glm-4.7, antigravity.geetasamodgeetasamoda.gemini-3-flash)`}},
		{"empty route", oneEngine, nil, []string{`webSearch.engines[0].providerKey: engine "glm" uses "glm.glm-4.7", but routing.web_search has no targets`}},
		{"bad policy", Config{Engines: oneEngine.Engines, InjectPolicy: "sometimes"}, route, []string{`webSearch.injectPolicy: "sometimes" is not one of selective, always`}},
		{"unnamed keyword set", Config{Engines: oneEngine.Engines, Keywords: []KeywordSet{{Keywords: []string{"x"}}}}, route, []string{"webSearch.keywords[0].name: a keyword set needs a name"}},
		{"duplicate keyword set", Config{Engines: oneEngine.Engines, Keywords: []KeywordSet{{Name: "a", Keywords: []string{"x"}}, {Name: "a", Keywords: []string{"y"}}}}, route,
			[]string{`webSearch.keywords[1].name: "a" is already the name of webSearch.keywords[0]`}},
		{"empty keyword set", Config{Engines: oneEngine.Engines, Keywords: []KeywordSet{{Name: "a"}}}, route, []string{`webSearch.keywords[0].keywords: set "a" has no keywords`}},
		{"empty keyword", Config{Engines: oneEngine.Engines, Keywords: []KeywordSet{{Name: "a", Keywords: []string{"x", " "}}}}, route, []string{"webSearch.keywords[0].keywords[1]: empty keyword"}},
		{"several problems", Config{Engines: []Engine{{ID: "a"}, {ID: "a", Kind: "brave"}}, InjectPolicy: "never"}, route,
			[]string{"engines[0]: engine", "engines[1].id", "injectPolicy"}},
	}
	for _, c := range cases {
		err := c.c.Validate(c.route)
		if len(c.errs) == 0 {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if got := strings.Count(err.Error(), "\n") + 1; got != len(c.errs) {
			t.Errorf("%s: %d problems reported, want %d:\n%v", c.name, got, len(c.errs), err)
		}
		for _, s := range c.errs {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q lacks %q", c.name, err, s)
			}
		}
	}
}

func TestConfigJSON(t *testing.T) {
	t.Parallel()
	// The seed's webSearch section, as a config file spells it.
	const section = `{
		"engines": [
			{"id": "glm", "providerKey": "glm.glm-4.7", "description": "GLM 4.7 – better for Chinese / domestic news", "default": true},
			{"id": "google", "providerKey": "antigravity.geetasamodgeetasamoda.gemini-3-flash", "description": "Gemini – broader global web coverage", "default": false}
		],
		"injectPolicy": "selective",
		"keywords": [{"name": "freshness"}]
	}`
	var c Config
	if err := json.Unmarshal([]byte(section), &c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate([]string{"glm.glm-4.7", "antigravity.geetasamodgeetasamoda.gemini-3-flash"}); err != nil {
		t.Fatal(err)
	}
	if len(c.Engines) != 2 || !c.Engines[0].Default || c.Engines[1].ProviderKey == "" || c.Keywords[0].Name != FreshnessName {
		t.Errorf("decoded %+v", c)
	}
}
