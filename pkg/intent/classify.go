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
	"slices"
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

// KeywordSet is a list of keywords that count as web search intent on their own, such
// as Freshness. ASCII keywords match like the built-in English phrases
// (case-insensitive, at a word start, as prefixes unless Whole; a space matches any
// run of white space); keywords that start with a non-ASCII byte match as exact
// substrings.
type KeywordSet struct {
	// Name identifies the set in Result.Rule ("extra:<Name>") and in the config.
	Name string `json:"name"`
	// Keywords are the phrases; empty strings are ignored.
	Keywords []string `json:"keywords,omitempty"`
	// Whole makes ASCII keywords match whole words only: the byte after a match is
	// not an ASCII letter or digit, so "now" does not match "nowhere". List the
	// inflections that should count ("price", "prices").
	Whole bool `json:"whole,omitempty"`
}

// FreshnessName is the name of the built-in Freshness set. In a config, a keyword set
// with this name and no keywords means Freshness itself.
const FreshnessName = "freshness"

// Freshness is the keyword list of seed 001 — words that ask for current data — with
// their plural and adverb forms, followed by their Chinese counterparts. The fleet
// classifies with it by default (see DefaultKeywordSets): people who ask for "the
// latest news", "the current price" or 今天的天气 expect the model to look it up, and
// the seed's verb+noun rules miss them. It matches whole words, so "currency",
// "nowhere", "Stockholm", "forecasting" and "newsletter" are not fresh. It stays
// broad: "now", "today", "current", "temperature" and 最近, 现在, 当前, 温度 also occur
// in messages that need no search (docs/benchmarks.md measures how often, on a labelled
// set). Treat it as a constant.
var Freshness = KeywordSet{Name: FreshnessName, Whole: true, Keywords: []string{
	"weather", "news", "current", "currently", "latest", "price", "prices", "stock", "stocks",
	"temperature", "temperatures", "forecast", "forecasts", "today", "now", "recent", "recently",
	"breaking",
	"天气", "新闻", "当前", "目前", "最新", "价格", "股价", "股票", "气温", "温度", "预报",
	"今天", "今日", "现在", "最近", "近期", "突发",
}}

// DefaultKeywordSets returns the keyword sets the fleet classifies with: the
// configured sets, then Freshness unless a configured set is named FreshnessName (that
// set, built-in or with its own keywords, takes its place).
func DefaultKeywordSets(configured ...KeywordSet) []KeywordSet {
	out := slices.Clone(configured)
	for _, ks := range configured {
		if ks.Name == FreshnessName {
			return out
		}
	}
	return append(out, Freshness)
}

// Classifier applies the built-in rules plus opt-in keyword sets. The zero value
// applies the built-in rules only. A Classifier is safe for concurrent use as long as
// nobody modifies Extra.
type Classifier struct {
	// Extra are keyword sets, tried only when no built-in rule fires. A set named
	// FreshnessName with no keywords stands for Freshness. The zero value has none;
	// the fleet uses DefaultKeywordSets.
	Extra []KeywordSet

	// rules caches "extra:<name>" per set so a hit does not allocate; NewClassifier
	// fills it, a literal Classifier builds the string on a hit instead.
	rules []string
}

// NewClassifier returns a Classifier with the given keyword sets; see
// DefaultKeywordSets for the fleet's.
func NewClassifier(extra ...KeywordSet) *Classifier {
	c := &Classifier{Extra: extra, rules: make([]string, len(extra))}
	for i, ks := range extra {
		c.rules[i] = "extra:" + ks.Name
	}
	return c
}

// Classify applies the built-in rules (no keyword sets, so no Freshness) to text; see
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
// Classifier not made by NewClassifier). It takes about 5 µs for 2 KB of text, 20 µs
// with the Freshness keywords.
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
