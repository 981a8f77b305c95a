// Package intent decides when the fleet offers the main model its server-side
// web_search tool, generates that tool's schema from the configured engines, and
// validates the model's call arguments and chooses the engine (seed 000, DESIGN §5).
//
// The pieces, in the order the chat worker uses them:
//
//   - LatestUserText and Classify look at the latest user message and say whether it
//     asks for a web search (and whether it asks for Google);
//   - Toolset.ShouldInject applies the configured injectPolicy and the chain's sticky
//     flag;
//   - Toolset.Tool is the precomputed OpenAI tools[] entry to append;
//   - Toolset.Parse validates a web_search call's arguments and picks its engine, or
//     returns an ArgError whose Result the model reads and corrects.
package intent

import (
	"strings"
)

// Result is the classifier's verdict on one user message.
type Result struct {
	// WebSearch is true when the text asks for a web search.
	WebSearch bool
	// GooglePreferred is true when it asks for Google in particular (谷歌搜索, 谷歌一下,
	// 百度一下, "google …"); the tool's engine enum is then narrowed to Google-backed
	// engines. It is never true without WebSearch.
	GooglePreferred bool
	// Rule names the rule that fired: "zh-hard", "en-hard", "zh-soft", "en-soft",
	// "extra:<set name>", or "" when none did.
	Rule string
	// Match is what matched, in canonical (lower-case) spelling, for logs and tests:
	// the phrase ("web search", "谷歌一下", "上网", "weather") or "verb+noun"
	// ("search+news", "搜+新闻").
	Match string
}

// KeywordSet is an opt-in list of keywords that count as web search intent on their
// own, such as Freshness. ASCII keywords match like the built-in English phrases
// (case-insensitive, at a word start, as prefixes; a space matches any run of white
// space); keywords that start with a non-ASCII byte match as exact substrings.
type KeywordSet struct {
	// Name identifies the set in Result.Rule ("extra:<Name>") and in the config.
	Name string `json:"name"`
	// Keywords are the phrases; empty strings are ignored.
	Keywords []string `json:"keywords,omitempty"`
}

// FreshnessName is the name of the built-in Freshness set. In a config, a keyword set
// with this name and no keywords means Freshness itself.
const FreshnessName = "freshness"

// Freshness is the keyword list of seed 001: words that ask for current data. It is
// not part of the default rules because it is broad ("now", "today", "price" occur in
// many messages that need no search); a config opts in. Treat it as a constant.
var Freshness = KeywordSet{Name: FreshnessName, Keywords: []string{
	"weather", "news", "current", "latest", "price", "stock",
	"temperature", "forecast", "today", "now", "recent", "breaking",
}}

// Classifier applies the built-in rules plus opt-in keyword sets. The zero value
// applies the built-in rules only. A Classifier is safe for concurrent use as long as
// nobody modifies Extra.
type Classifier struct {
	// Extra are opt-in keyword sets, tried only when no built-in rule fires. A set
	// named FreshnessName with no keywords stands for Freshness.
	Extra []KeywordSet

	// rules caches "extra:<name>" per set so a hit does not allocate; NewClassifier
	// fills it, a literal Classifier builds the string on a hit instead.
	rules []string
}

// NewClassifier returns a Classifier with the given opt-in sets.
func NewClassifier(extra ...KeywordSet) *Classifier {
	c := &Classifier{Extra: extra, rules: make([]string, len(extra))}
	for i, ks := range extra {
		c.rules[i] = "extra:" + ks.Name
	}
	return c
}

// Classify applies the built-in rules (no opt-in sets) to text; see
// Classifier.Classify.
func Classify(text string) Result {
	return classify(text, nil).Result
}

// Classify decides whether text (the latest user message) asks for a web search.
//
// The rules are seed 000's, with substring matching and no regular expressions, in
// this order of precedence:
//
//  1. zh-hard: 谷歌搜索, 谷歌一下, 百度一下 — Google-preferred.
//  2. en-hard: "/search", "web search", "search the web" and the rest of enGates' hard
//     phrases.
//  3. zh-soft: 上网; or a Chinese verb {搜索, 查找, 搜} with any noun.
//  4. en-soft: an English verb {search, find, look up, look for, google} with any noun
//     {web, internet, online, news, information, info, report(s), article(s), …}.
//  5. extra:<name>: a keyword of an opt-in set.
//
// Verbs and nouns of both languages combine ("search 新闻", "搜一下 news"): mixed
// messages are common and the seed does not forbid it; the rule is named after the
// verb's language. Any hit is Google-preferred when the text also says "google" or
// 谷歌 (the seed: 包含 "google" 时会被视为 "Google 优先").
//
// English words are matched at a word start — the byte before is not an ASCII letter
// or digit — which is stricter than the seed's plain substring test: plain substrings
// make "research" a search verb, "cobweb" the web and "known" the word "now", and
// every such false hit offers the model a tool it does not need. Matches stay prefixes,
// so inflections still count ("searching", "websites", "reports", "newsletter"),
// except for a few phrases that must also end at a word end: "web" (not "webpack",
// "webhook", "websocket"), the "look up"/"look for" forms (not "look forward"),
// "google it" (not "google items"), "search the web", "search on the web" and
// "search the net" (not "search the network"). Case is folded for ASCII letters only;
// a space in a phrase matches any run of ASCII white space. When several phrases of
// the winning rule occur, Match reports the one listed first in the tables.
//
// Classify only reads text: it never panics, treats invalid UTF-8 as bytes that match
// nothing, and does not allocate (except the Rule string of an opt-in hit on a
// Classifier not made by NewClassifier). It takes about 1 µs for 2 KB of text.
func (c *Classifier) Classify(text string) Result {
	if c == nil {
		return classify(text, nil).Result
	}
	r := classify(text, c.Extra)
	if r.Rule == extraRule {
		// classify reports an opt-in hit by set index; name the set.
		r.Rule = c.ruleName(r.set)
	}
	return r.Result
}

// ruleName returns "extra:<name>" of set i without allocating when NewClassifier
// cached it.
func (c *Classifier) ruleName(i int) string {
	if i < len(c.rules) && strings.TrimPrefix(c.rules[i], "extra:") == c.Extra[i].Name {
		return c.rules[i]
	}
	return "extra:" + c.Extra[i].Name
}

// extraRule is the placeholder Rule classify returns for an opt-in hit.
const extraRule = "extra:"

// Rule names.
const (
	RuleZhHard = "zh-hard"
	RuleEnHard = "en-hard"
	RuleZhSoft = "zh-soft"
	RuleEnSoft = "en-soft"
)
