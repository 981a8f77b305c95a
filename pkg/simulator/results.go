package simulator

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
)

// Simulated search results are made from the query, so a search is about what was
// asked: every engine kind and every native model search renders the same generated
// pages (titles and snippets that repeat the query, URLs on example domains with a
// path made from the query) in its provider's recorded wire shape. The same ask gives
// the same pages, byte for byte, so tests and replays can rely on them; a different
// query gives different pages.
//
// What the engine request carries is honoured: the number of results, allowed and
// blocked domains (as request fields or as site: operators in the query) and the
// recency window (pages are then dated inside it, counted back from the day of the
// request; without one they carry fixed dates in 2025).
//
// "sim:fixture" in a query answers with the recorded fixture verbatim instead, for
// tests of fixture fidelity through the simulator; "sim:huge" pads every page's
// snippet to about 400 KB (five pages: a 2 MB result), for tests of result bounds.

// searchAsk is what one simulated search was asked.
type searchAsk struct {
	// query is the search text, directives and site: operators removed.
	query string
	// count is the number of results asked for (0: the kind's default).
	count int
	// allow and block are domain filters.
	allow, block []string
	// recency is "day", "week", "month", "year" or "" (no limit).
	recency string
	// huge pads each snippet to hugeSnippet bytes ("sim:huge").
	huge bool
}

// hugeSnippet is the size of a "sim:huge" page's snippet.
const hugeSnippet = 400 << 10

// simHit is one generated page.
type simHit struct {
	Title, URL, Host, Snippet string
	// Quote is the snippet's first sentence: what an answer citing the page quotes.
	Quote string
	// Date is the page's publication date (UTC midnight).
	Date time.Time
	// Score falls from about 0.9 with the rank.
	Score float64
}

// defaultHits is how many pages a search finds when the request names no count.
const defaultHits = 5

// simSites are the stable example domains the pages live on.
var simSites = []string{
	"news.example.com", "wiki.example.org", "docs.example.net", "blog.example.com",
	"forum.example.org", "data.example.net", "guide.example.com", "archive.example.org",
}

// titleForms and leadForms phrase the n-th page's title and the start of its snippet.
var (
	titleForms = []string{"%s: overview and key facts", "%s: the latest reports", "What we know about %s", "%s, explained",
		"%s: questions and answers", "%s: timeline and background", "Figures and data on %s", "%s: a discussion"}
	leadForms = []string{"An overview of", "The latest reports on", "What is known about", "An explainer on",
		"Questions and answers about", "A timeline of", "Figures and data on", "A discussion of"}
)

var (
	simDirectiveRE = regexp.MustCompile(`\s*sim:\S+`)
	siteOpRE       = regexp.MustCompile(`(?i)(^|\s)(-?)site:([^\s()]+)`)
	orOpRE         = regexp.MustCompile(`(?i)^\s*\(?\s*(OR\s*)*\)?\s*$`)
)

// newAsk reads a raw query: directives are dropped and site: operators (Brave's and
// SearXNG's way of filtering domains) become domain filters.
func newAsk(raw string, count int, allow, block []string, recency string) searchAsk {
	q := simDirectiveRE.ReplaceAllString(raw, "")
	for _, m := range siteOpRE.FindAllStringSubmatch(q, -1) {
		if m[2] == "-" {
			block = append(block, m[3])
		} else {
			allow = append(allow, m[3])
		}
	}
	q = siteOpRE.ReplaceAllString(q, " ")
	q = strings.Join(strings.Fields(strings.NewReplacer("(", " ", ")", " ").Replace(q)), " ")
	if orOpRE.MatchString(q) {
		q = ""
	}
	// Sentence ends inside the query would cut the quotes made from it short.
	q = strings.NewReplacer("? ", " ", "! ", " ", "？", " ", "！", " ", "。", " ").Replace(q)
	q = strings.TrimSpace(strings.TrimRight(strings.Join(strings.Fields(q), " "), " ?!."))
	return searchAsk{query: q, count: count, allow: allow, block: block, recency: recency, huge: strings.Contains(raw, "sim:huge")}
}

// shown is the query as pages quote it.
func (a searchAsk) shown() string {
	return cmp.Or(a.query, "this search")
}

// seed is the ask's hash: everything generated is derived from it.
func (a searchAsk) seed() [32]byte {
	return sha256.Sum256([]byte(a.query + "\x00" + strings.Join(a.allow, ",") + "\x00" + strings.Join(a.block, ",") + "\x00" + a.recency))
}

// id is a stable hex id of the ask, n characters long (n ≤ 64).
func (a searchAsk) id(n int) string {
	s := a.seed()
	return hex.EncodeToString(s[:])[:n]
}

// hits generates the ask's pages: count of them (def when the ask names none, at most
// 50), on the allowed domains when there are any, never on a blocked one.
func (a searchAsk) hits(def int) []simHit {
	n := a.count
	if n <= 0 {
		n = def
	}
	n = min(n, 50)
	sites := simSites
	if len(a.allow) > 0 {
		sites = nil
		for _, d := range a.allow {
			if d = cleanSite(d); d != "" {
				sites = append(sites, d)
			}
		}
	}
	kept := slices.DeleteFunc(slices.Clone(sites), func(s string) bool { return blocked(s, a.block) })
	if len(kept) == 0 || n == 0 {
		return nil
	}
	seed := a.seed()
	start := int(binary.BigEndian.Uint32(seed[:4]) % uint32(len(kept)))
	slug := slugOf(a.query, seed)
	q := a.shown()
	out := make([]simHit, 0, n)
	for i := range n {
		host := kept[(start+i)%len(kept)]
		path := slug
		if round := i / len(kept); round > 0 {
			path = fmt.Sprintf("%s-%d", slug, round+1)
		}
		form := (int(seed[4]) + i) % len(titleForms)
		quote := fmt.Sprintf("%s %s, simulated result %d of %d.", leadForms[form], q, i+1, n)
		snippet := quote + " The searchfleet simulator wrote this page from the query's own words, so the same query always finds it."
		if a.huge {
			snippet += strings.Repeat(" More of the same words.", (hugeSnippet-len(snippet))/24)
		}
		out = append(out, simHit{
			Title:   upperFirst(fmt.Sprintf(titleForms[form], q)),
			URL:     "https://" + host + "/" + path,
			Host:    host,
			Quote:   quote,
			Snippet: snippet,
			Date:    a.date(seed, i),
			Score:   float64(int((0.9-0.05*float64(i))*1e4)) / 1e4,
		})
	}
	return out
}

// date is the i-th page's date: inside the recency window counted back from today,
// or a fixed day of 2025 without one.
func (a searchAsk) date(seed [32]byte, i int) time.Time {
	b := int(seed[(5+i)%32])
	days := map[string]int{"day": 1, "week": 7, "month": 28, "year": 360}[a.recency]
	if days == 0 {
		return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, (b+37*i)%360)
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	return today.AddDate(0, 0, -((b + i) % days))
}

// recencyOf maps the recency words of the providers' requests to the ask's.
func recencyOf(s string) string {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "day", "d", "pd", "oneday", "qdr:d", "1d":
		return "day"
	case "week", "w", "pw", "oneweek", "qdr:w", "1w":
		return "week"
	case "month", "m", "pm", "onemonth", "qdr:m", "1m":
		return "month"
	case "year", "y", "py", "oneyear", "qdr:y", "1y":
		return "year"
	}
	return ""
}

// cleanSite reduces a domain filter entry to a host ("https://a.b/x" → "a.b").
func cleanSite(d string) string {
	d = strings.ToLower(strings.TrimSpace(d))
	d = strings.TrimPrefix(strings.TrimPrefix(d, "https://"), "http://")
	d, _, _ = strings.Cut(d, "/")
	return strings.TrimPrefix(d, "*.")
}

// blocked reports whether host is one of the blocked domains or under one.
func blocked(host string, block []string) bool {
	return slices.ContainsFunc(block, func(b string) bool {
		b = cleanSite(b)
		return b != "" && (host == b || strings.HasSuffix(host, "."+b))
	})
}

// slugOf is the URL path made from the query's ASCII words, or from its hash when it
// has none (a query in Chinese).
func slugOf(q string, seed [32]byte) string {
	words := strings.FieldsFunc(strings.ToLower(q), func(r rune) bool {
		return r > unicode.MaxASCII || !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	s := strings.Join(words, "-")
	if len(s) > 60 {
		s = strings.TrimRight(s[:60], "-")
	}
	return cmp.Or(s, "q-"+hex.EncodeToString(seed[:4]))
}

func upperFirst(s string) string {
	for i, r := range s {
		return string(unicode.ToUpper(r)) + s[i+len(string(r)):]
	}
	return s
}

// groundedText is the answer an LLM-grounded engine writes from hits: one sentence per
// cited page (its quote), so each citation quotes its source.
func groundedText(hits []simHit) []string {
	k := min(len(hits), 3)
	out := make([]string, 0, k)
	for _, h := range hits[:k] {
		out = append(out, h.Quote)
	}
	return out
}
