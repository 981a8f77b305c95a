package intent

import (
	"slices"
	"unicode"
)

// knownLanguages are the languages QueryLanguage tells apart; an engine's Languages
// name some of them.
var knownLanguages = []string{"en", "ja", "ko", "zh"}

// QueryLanguage guesses a search query's language from its script: "ja" when it has
// kana, "ko" when it has Hangul, "zh" when it has Han characters (and no kana), and
// "en" for everything else (Latin and other scripts: the engines' default). It counts
// script, not words, so a Chinese query with an English brand name is still "zh".
func QueryLanguage(q string) string {
	var han, kana, hangul int
	for _, r := range q {
		switch {
		case unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r):
			kana++
		case unicode.Is(unicode.Hangul, r):
			hangul++
		case unicode.Is(unicode.Han, r):
			han++
		}
	}
	switch {
	case kana > 0:
		return "ja"
	case hangul > 0 && hangul >= han:
		return "ko"
	case han > 0:
		return "zh"
	}
	return "en"
}

// speaks reports whether e is declared for lang (an engine that declares none serves
// every language).
func (e Engine) speaks(lang string) bool {
	return len(e.Languages) == 0 || slices.Contains(e.Languages, lang)
}

// chooseEngine picks the engine of a call that names none. In order: the view's
// default when it is declared for the query's language, or serves any language and the
// query is English; an engine declared for the language; and, when the view has a
// default: the default if it serves any language, an engine that serves any language,
// the default. It returns "" when the view has no default and no engine is declared
// for the language (the model must name one); why says how the engine was chosen, for
// the job's trace.
func (v *view) chooseEngine(query string) (id, why string) {
	lang := QueryLanguage(query)
	var def *Engine
	for i := range v.engines {
		if v.engines[i].ID == v.def {
			def = &v.engines[i]
		}
	}
	declared := func(e Engine) bool { return slices.Contains(e.Languages, lang) }
	if def != nil && (declared(*def) || lang == "en" && def.speaks(lang)) {
		return def.ID, ChoiceDefault
	}
	for _, e := range v.engines {
		if declared(e) {
			return e.ID, ChoiceLanguage + lang
		}
	}
	if def == nil {
		return "", "" // the model must name the engine (ENGINE_REQUIRED)
	}
	if def.speaks(lang) {
		return def.ID, ChoiceDefault
	}
	for _, e := range v.engines {
		if len(e.Languages) == 0 {
			return e.ID, ChoiceLanguage + lang
		}
	}
	return def.ID, ChoiceDefault
}

// How a call's engine was chosen (Call.Choice).
const (
	ChoiceModel    = "model"     // the model named it
	ChoiceDefault  = "default"   // the default engine
	ChoiceLanguage = "language:" // + the query's language: an engine declared for it
)
