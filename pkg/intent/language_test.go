package intent

import "testing"

func TestQueryLanguage(t *testing.T) {
	for q, want := range map[string]string{
		"Go 1.26 release notes":    "en",
		"今天北京天气怎么样":                "zh",
		"英伟达 Nvidia 最新财报":          "zh",
		"東京の天気":                    "ja",
		"서울 날씨":                    "ko",
		"Ünïcödé café prices":      "en",
		"новости сегодня":          "en",
		"":                         "en",
		"2026年 GPT-6 release date": "zh",
	} {
		if got := QueryLanguage(q); got != want {
			t.Errorf("QueryLanguage(%q) = %q, want %q", q, got, want)
		}
	}
}

// When the model leaves the engine to the fleet, a Chinese query prefers an engine
// declared for Chinese, an English one the default; a named engine always wins.
func TestEngineChoice(t *testing.T) {
	ts, err := NewToolset(Config{Engines: []Engine{
		{ID: "brave", Kind: "brave", Default: true},
		{ID: "glm", Kind: "glm-api", Languages: []string{"zh"}},
		{ID: "kimi", Kind: "kimi", Languages: []string{"zh"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args, engine, choice string
	}{
		{`{"query":"latest Go release"}`, "brave", ChoiceDefault},
		{`{"query":"今天的国际新闻头条"}`, "glm", ChoiceLanguage + "zh"},
		{`{"query":"今天的国际新闻头条","engine":"brave"}`, "brave", ChoiceModel},
		{`{"query":"東京の天気"}`, "brave", ChoiceDefault}, // no engine declares Japanese
	} {
		got, aerr := ts.Parse(c.args, false)
		if aerr != nil {
			t.Fatalf("%s: %v", c.args, aerr)
		}
		if got.Engine != c.engine || got.Choice != c.choice {
			t.Errorf("%s: engine %q (%s), want %q (%s)", c.args, got.Engine, got.Choice, c.engine, c.choice)
		}
	}

	// No default: a Chinese query still finds its engine; an English one must name one.
	ts, err = NewToolset(Config{Engines: []Engine{{ID: "brave", Kind: "brave"}, {ID: "glm", Kind: "glm-api", Languages: []string{"zh"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, aerr := ts.Parse(`{"query":"北京天气"}`, false); aerr != nil || got.Engine != "glm" {
		t.Errorf("no default, Chinese query: %+v %v, want glm", got, aerr)
	}
	if _, aerr := ts.Parse(`{"query":"weather in Paris"}`, false); aerr == nil || aerr.Type != EngineRequired {
		t.Errorf("no default, English query: %v, want %s", aerr, EngineRequired)
	}

	// A default declared only for Chinese is not used for English when another engine
	// serves any language.
	ts, err = NewToolset(Config{Engines: []Engine{{ID: "glm", Kind: "glm-api", Default: true, Languages: []string{"zh"}}, {ID: "brave", Kind: "brave"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, aerr := ts.Parse(`{"query":"weather in Paris"}`, false); aerr != nil || got.Engine != "brave" {
		t.Errorf("Chinese-only default, English query: %+v %v, want brave", got, aerr)
	}
	if got, aerr := ts.Parse(`{"query":"北京天气"}`, false); aerr != nil || got.Engine != "glm" || got.Choice != ChoiceDefault {
		t.Errorf("Chinese-only default, Chinese query: %+v %v, want glm (default)", got, aerr)
	}

	if _, err := NewToolset(Config{Engines: []Engine{{ID: "x", Kind: "brave", Languages: []string{"klingon"}}}}); err == nil {
		t.Error("an unknown language must be refused")
	}
}
