package intent

import (
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	cases := []struct {
		text   string
		want   Result
		reason string
	}{
		// Chinese hard hits: all three are Google-preferred (seed).
		{"谷歌搜索 golang generics", Result{true, true, RuleZhHard, "谷歌搜索"}, ""},
		{"谷歌一下 weather", Result{true, true, RuleZhHard, "谷歌一下"}, "mixed text"},
		{"百度一下 北京天气", Result{true, true, RuleZhHard, "百度一下"}, ""},
		{"先谷歌一下再百度一下", Result{true, true, RuleZhHard, "谷歌一下"}, "first in the text"},
		{"web search 然后谷歌搜索", Result{true, true, RuleZhHard, "谷歌搜索"}, "zh-hard outranks en-hard"},

		// Chinese soft hits.
		{"我想上网看看", Result{true, false, RuleZhSoft, "上网"}, ""},
		{"帮我搜一下最新新闻", Result{true, false, RuleZhSoft, "搜+新闻"}, ""},
		{"查找信息", Result{true, false, RuleZhSoft, "查找+信息"}, ""},
		{"请搜索网络上的报道", Result{true, false, RuleZhSoft, "搜索+网络"}, "lowest ids win"},
		{"搜搜索网络", Result{true, false, RuleZhSoft, "搜索+网络"}, "搜索 before 搜"},
		{"联网查找", Result{true, false, RuleZhSoft, "查找+联网"}, "any order"},
		{"用谷歌搜一下新闻", Result{true, true, RuleZhSoft, "搜+新闻"}, "谷歌 makes it Google-preferred"},
		{"搜索", Result{}, "verb alone"},
		{"新闻联播", Result{}, "noun alone"},
		{"谷歌", Result{}, "brand alone"},
		{"上", Result{}, ""},

		// English hard hits.
		{"Search the web for Go 1.26 release notes", Result{true, false, RuleEnHard, "search the web"}, ""},
		{"WEB SEARCH", Result{true, false, RuleEnHard, "web search"}, "upper case"},
		{"/search foo", Result{true, false, RuleEnHard, "/search"}, ""},
		{"try /SEARCH", Result{true, false, RuleEnHard, "/search"}, ""},
		{"use websearch please", Result{true, false, RuleEnHard, "websearch"}, ""},
		{"do a web-search", Result{true, false, RuleEnHard, "web-search"}, ""},
		{"an internet search", Result{true, false, RuleEnHard, "internet search"}, ""},
		{"an internet-search", Result{true, false, RuleEnHard, "internet-search"}, ""},
		{"online search tools", Result{true, false, RuleEnHard, "online search"}, ""},
		{"search online for flights", Result{true, false, RuleEnHard, "search online"}, ""},
		{"search the internet", Result{true, false, RuleEnHard, "search the internet"}, ""},
		{"search on the web", Result{true, false, RuleEnHard, "search on the web"}, ""},
		{"search on the Internet", Result{true, false, RuleEnHard, "search on the internet"}, ""},
		{"search the net", Result{true, false, RuleEnHard, "search the net"}, ""},
		{"search  the\n\tweb", Result{true, false, RuleEnHard, "search the web"}, "white space runs"},
		{"several web searches", Result{true, false, RuleEnHard, "web search"}, "prefix"},
		{"just google it", Result{true, true, RuleEnHard, "google it"}, "Google-preferred"},
		{"Google Search Console setup", Result{true, true, RuleEnHard, "google search"}, "Google-preferred"},
		{"search the web, google search", Result{true, true, RuleEnHard, "search the web"}, "lowest id; google anywhere"},
		{"google the Go 1.26 release notes", Result{true, true, RuleEnHard, "google the"}, "google as a verb"},
		{"Google for cheap flights to Rome", Result{true, true, RuleEnHard, "google for"}, ""},
		{"google how to renew a passport", Result{true, true, RuleEnHard, "google how"}, ""},
		{"can you google whether the bridge is open", Result{true, true, RuleEnHard, "you google"}, "whether is not in the list; you google is"},
		{"Please Google Nvidia earnings", Result{true, true, RuleEnHard, "please google"}, ""},
		{"google what the error means", Result{true, true, RuleEnHard, "google what"}, ""},
		{"Google released a new Pixel", Result{}, "the company"},
		{"Google's new phone", Result{}, ""},
		{"google theme for vscode", Result{}, "google the is a whole phrase"},
		{"google format strings", Result{}, "google for is a whole phrase"},

		// English soft hits.
		{"please google the latest news", Result{true, true, RuleEnHard, "google the"}, "google the outranks please google"},
		{"googled the news", Result{true, true, RuleEnSoft, "google+news"}, ""},
		{"find information online", Result{true, false, RuleEnSoft, "find+online"}, "lowest noun id"},
		{"fIND iNFO", Result{true, false, RuleEnSoft, "find+info"}, "case"},
		{"look up the news", Result{true, false, RuleEnSoft, "look up+news"}, ""},
		{"Looking for articles about Rust", Result{true, false, RuleEnSoft, "look for+article"}, ""},
		{"can you look it up on the internet", Result{true, false, RuleEnSoft, "look up+internet"}, ""},
		{"do a lookup of news", Result{true, false, RuleEnSoft, "look up+news"}, ""},
		{"find websites about sailing", Result{true, false, RuleEnSoft, "find+website"}, "prefix"},
		{"searching newsletters", Result{true, false, RuleEnSoft, "search+news"}, "prefixes"},
		{"Find reports on EV sales", Result{true, false, RuleEnSoft, "find+report"}, ""},
		{"search the news about google", Result{true, true, RuleEnSoft, "search+news"}, "google anywhere"},
		{"googling the web page", Result{true, true, RuleEnSoft, "google+web"}, ""},
		{"search\u00a0the web", Result{true, false, RuleEnSoft, "search+web"}, "NBSP is not ASCII white space"},
		{"\xff\xfe search the web \xe8", Result{true, false, RuleEnHard, "search the web"}, "invalid UTF-8 around"},
		{"find my keys", Result{}, ""},
		{"research the history of Rome", Result{}, "research is not search"},
		{"cobweb search", Result{}, "cobweb is not web"},
		{"find the webpack config", Result{}, "web is a whole word"},
		{"find the webhook handler", Result{}, ""},
		{"I look forward to the news", Result{}, "look for is a whole phrase"},
		{"2web search", Result{}, "a letter after a digit does not start a word"},
		{"web2 search", Result{}, ""},
		{"see https://example.com/search?q=x", Result{}, "/search in a URL"},
		{"google items", Result{}, "google it is a whole phrase"},
		{"", Result{}, ""},

		// Both languages together.
		{"search 新闻", Result{true, false, RuleEnSoft, "search+新闻"}, "English verb, Chinese noun"},
		{"帮我 search 一下最新的新闻", Result{true, false, RuleEnSoft, "search+新闻"}, ""},
		{"搜一下 news", Result{true, false, RuleZhSoft, "搜+news"}, "Chinese verb, English noun"},
		{"查找 news 和新闻, find info", Result{true, false, RuleZhSoft, "查找+新闻"}, "same-language pairs first"},
		{"find 信息 and search news", Result{true, false, RuleEnSoft, "search+news"}, ""},
	}
	for _, c := range cases {
		got := Classify(c.text)
		if got != c.want {
			t.Errorf("Classify(%q) = %+v, want %+v (%s)", c.text, got, c.want, c.reason)
		}
		if ref := reference(c.text, nil); ref != got {
			t.Errorf("Classify(%q) = %+v, reference %+v", c.text, got, ref)
		}
	}
}

func TestClassifyExtra(t *testing.T) {
	t.Parallel()
	fresh := NewClassifier(Freshness)
	implicit := &Classifier{Extra: []KeywordSet{{Name: FreshnessName}}}
	custom := NewClassifier(
		KeywordSet{Name: "zh", Keywords: []string{" ", "天气", "股价"}},
		KeywordSet{Name: "tags", Keywords: []string{"#news", "5g", "Stock Price"}},
	)
	cases := []struct {
		c    *Classifier
		text string
		want Result
	}{
		{nil, "weather in Paris today", Result{}},
		{&Classifier{}, "weather in Paris today", Result{}},
		{fresh, "weather in Paris today", Result{true, false, "extra:freshness", "weather"}},
		{implicit, "weather in Paris today", Result{true, false, "extra:freshness", "weather"}},
		{fresh, "What's the WEATHER?", Result{true, false, "extra:freshness", "weather"}},
		{fresh, "today in Paris, weather", Result{true, false, "extra:freshness", "weather"}},
		{fresh, "known issues", Result{}},
		{fresh, "nowadays", Result{}},
		{fresh, "currency exchange in Python", Result{}},
		{fresh, "time series forecasting", Result{}},
		{fresh, "a trip to Stockholm", Result{}},
		{fresh, "the newsletter", Result{}},
		{fresh, "Google stock", Result{true, true, "extra:freshness", "stock"}},
		{fresh, "stocks to watch", Result{true, false, "extra:freshness", "stocks"}},
		{fresh, "today's headlines", Result{true, false, "extra:freshness", "today"}},
		{fresh, "prices", Result{true, false, "extra:freshness", "prices"}},
		{fresh, "What is the current price of bitcoin?", Result{true, false, "extra:freshness", "current"}},
		{fresh, "What is the latest news about Nvidia?", Result{true, false, "extra:freshness", "news"}},
		{fresh, "今天北京天气怎么样", Result{true, false, "extra:freshness", "天气"}},
		{fresh, "最近有什么新闻", Result{true, false, "extra:freshness", "新闻"}},
		{fresh, "北京明天气温", Result{true, false, "extra:freshness", "天气"}}, // 明天气温 contains 天气
		{fresh, "上海气温多少度", Result{true, false, "extra:freshness", "气温"}},
		{implicit, "now", Result{true, false, "extra:freshness", "now"}},
		{implicit, "nowhere", Result{}},
		{NewClassifier(KeywordSet{Name: "w", Whole: true, Keywords: []string{"5g", "#news"}}), "5gs #news #newsy", Result{true, false, "extra:w", "#news"}},
		{fresh, "search the web today", Result{true, false, RuleEnHard, "search the web"}},
		{custom, "北京天气怎么样", Result{true, false, "extra:zh", "天气"}},
		{custom, "see #news", Result{true, false, "extra:tags", "#news"}},
		{custom, "see a#news", Result{}},
		{custom, "5g towers", Result{true, false, "extra:tags", "5g"}},
		{custom, "a5g tower", Result{}},
		{custom, "the stock   price", Result{true, false, "extra:tags", "Stock Price"}},
		{custom, "天气 and 5g", Result{true, false, "extra:zh", "天气"}},
		{NewClassifier(KeywordSet{Name: "a", Keywords: []string{"x"}}, KeywordSet{Name: "b", Keywords: []string{"y"}}), "y x", Result{true, false, "extra:a", "x"}},
	}
	for _, c := range cases {
		got := c.c.Classify(c.text)
		if got != c.want {
			t.Errorf("Classify(%q) = %+v, want %+v", c.text, got, c.want)
		}
		var extra []KeywordSet
		if c.c != nil {
			extra = c.c.Extra
		}
		if ref := reference(c.text, extra); ref != got {
			t.Errorf("Classify(%q) = %+v, reference %+v", c.text, got, ref)
		}
	}
}

func TestClassifyDoesNotAllocate(t *testing.T) {
	// Not parallel: testing.AllocsPerRun refuses to run in parallel tests.
	fresh := NewClassifier(Freshness)
	literal := &Classifier{Extra: []KeywordSet{Freshness}}
	for _, text := range []string{
		benchNoHit, benchLateHit, "帮我搜一下最新新闻", "please google the latest news", "谷歌一下", "x", "weather today",
	} {
		if n := testing.AllocsPerRun(100, func() { Classify(text) }); n != 0 {
			t.Errorf("Classify(%.20q…) allocates %v times", text, n)
		}
		if n := testing.AllocsPerRun(100, func() { fresh.Classify(text) }); n != 0 {
			t.Errorf("fresh.Classify(%.20q…) allocates %v times", text, n)
		}
	}
	// A literal Classifier builds "extra:freshness" on an opt-in hit.
	if n := testing.AllocsPerRun(100, func() { literal.Classify("weather today") }); n != 1 {
		t.Errorf("literal.Classify allocates %v times, want 1", n)
	}
}

// TestKeywordTables checks the invariants the tables keep.
func TestKeywordTables(t *testing.T) {
	t.Parallel()
	hardSeen := map[uint8]bool{hSlashSearch: true}
	for letter, gates := range enGates {
		for _, g := range gates {
			if len(g.stem) < 3 || g.stem[0] != byte('a'+letter) {
				t.Errorf("gate %q: stems are at least 3 letters and start with their letter %c", g.stem, 'a'+letter)
			}
			for i := range len(g.stem) {
				if c := g.stem[i]; c < 'a' || c > 'z' {
					t.Errorf("gate %q: stems are lower-case letters", g.stem)
				}
			}
			for _, p := range g.phrases {
				if !strings.HasPrefix(p.text, g.stem) {
					t.Errorf("phrase %q does not start with its gate %q", p.text, g.stem)
				}
				if strings.ToLower(p.text) != p.text || strings.Contains(p.text, "  ") {
					t.Errorf("phrase %q: lower case, single spaces", p.text)
				}
				switch p.kind {
				case hard:
					if enHard[p.id] != p.text {
						t.Errorf("hard phrase %q has id %d, which is %q", p.text, p.id, enHard[p.id])
					}
					hardSeen[p.id] = true
				case verb:
					if !strings.HasPrefix(strings.ReplaceAll(p.text, "s ", " "), verbNames[p.id][:3]) {
						t.Errorf("verb %q has id %d (%q)", p.text, p.id, verbNames[p.id])
					}
				case noun:
					if !strings.HasPrefix(p.text, nounNames[p.id]) {
						t.Errorf("noun %q has id %d (%q)", p.text, p.id, nounNames[p.id])
					}
				default:
					t.Errorf("English phrase %q has kind %d", p.text, p.kind)
				}
			}
		}
	}
	if numHard > 32 || numVerbs > 16 || numNouns > 16 {
		t.Errorf("classify keeps ids in uint32 (hard) and uint16 sets: %d hard, %d verbs, %d nouns", numHard, numVerbs, numNouns)
	}
	if len(hardSeen) != int(numHard) {
		t.Errorf("%d hard ids used, %d defined", len(hardSeen), numHard)
	}
	for v := range numVerbs {
		for n := range numNouns {
			if want := verbNames[v] + "+" + nounNames[n]; softMatch[v][n] != want {
				t.Errorf("softMatch[%d][%d] = %q, want %q", v, n, softMatch[v][n], want)
			}
		}
	}
	for _, g := range zhGroups {
		for _, p := range g.phrases {
			if !strings.HasPrefix(p.text, string(g.first)) {
				t.Errorf("phrase %q is not in the group of %q", p.text, g.first)
			}
			if b := p.text[0]; b < 0xE4 || b > 0xE9 {
				t.Errorf("phrase %q starts with byte %#x, outside the range of CJK lead bytes", p.text, b)
			}
			if p.kind == verb && verbNames[p.id] != p.text || p.kind == noun && nounNames[p.id] != p.text {
				t.Errorf("phrase %q has the wrong id %d", p.text, p.id)
			}
		}
	}
}

// reference is a deliberately naive implementation of the rules: every phrase and
// keyword is tried at every position where it can start. Classify must agree with it
// on every input (FuzzClassify checks that).
func reference(s string, extra []KeywordSet) Result { return newRef(extra).classify(s) }

// ref is the reference's table: every phrase by its first byte (lower case), built
// once per fuzz run. The lookups and comparisons go through maps and the standard
// library, which fuzzing does not instrument, so the reference stays fast enough to
// run (and minimize) under the fuzzer.
type ref struct {
	byFirst map[byte][]phrase // English phrases and "/search"
	zh      []phrase
	extra   []KeywordSet
}

func newRef(extra []KeywordSet) *ref {
	r := &ref{byFirst: map[byte][]phrase{'/': {{text: "/search", kind: hard, id: hSlashSearch}}}, extra: extra}
	for _, gates := range enGates {
		for _, g := range gates {
			for _, p := range g.phrases {
				r.byFirst[p.text[0]] = append(r.byFirst[p.text[0]], p)
			}
		}
	}
	for _, g := range zhGroups {
		r.zh = append(r.zh, g.phrases...)
	}
	return r
}

func (r *ref) classify(s string) Result {
	wordStart := func(i int) bool { return i == 0 || !isAlnumRef(s[i-1]) }
	var hardIDs uint32
	var verbs, nouns uint16
	isDirect, google := false, false
	rec := func(p phrase) {
		google = google || p.google
		switch p.kind {
		case hard:
			hardIDs |= 1 << p.id
		case verb:
			verbs |= 1 << p.id
		case noun:
			nouns |= 1 << p.id
		case direct:
			isDirect = true
		}
	}
	for i := range len(s) {
		if s[i] < 0x80 {
			continue
		}
		for _, p := range r.zh {
			if strings.HasPrefix(s[i:], p.text) {
				if p.kind == hard {
					return Result{true, true, RuleZhHard, p.text}
				}
				rec(p)
			}
		}
	}
	for i := range len(s) {
		if !wordStart(i) {
			continue
		}
		for _, p := range r.byFirst[lowerRef(s[i])] {
			end, ok := matchRef(s, i, p.text)
			if ok && (!p.whole || end == len(s) || !isAlnumRef(s[end])) {
				rec(p)
			}
		}
	}
	first := func(set uint32) int {
		for i := range 32 {
			if set>>i&1 != 0 {
				return i
			}
		}
		return -1
	}
	var zhV, zhN uint16 = 1<<vZhSousuo | 1<<vZhChazhao | 1<<vZhSou, 1<<nZhWangluo | 1<<nZhLianwang | 1<<nZhXinwen | 1<<nZhXinxi | 1<<nZhBaodao
	var res Result
	switch {
	case hardIDs != 0:
		res = Result{Rule: RuleEnHard, Match: enHard[first(hardIDs)]}
	case isDirect:
		res = Result{Rule: RuleZhSoft, Match: "上网"}
	case verbs&zhV != 0 && nouns&zhN != 0:
		res = Result{Rule: RuleZhSoft, Match: verbNames[first(uint32(verbs&zhV))] + "+" + nounNames[first(uint32(nouns&zhN))]}
	case verbs&^zhV != 0 && nouns&^zhN != 0:
		res = Result{Rule: RuleEnSoft, Match: verbNames[first(uint32(verbs&^zhV))] + "+" + nounNames[first(uint32(nouns&^zhN))]}
	case verbs != 0 && nouns != 0:
		res = Result{Rule: RuleEnSoft, Match: verbNames[first(uint32(verbs))] + "+" + nounNames[first(uint32(nouns))]}
		if verbs&zhV != 0 && first(uint32(verbs)) == first(uint32(verbs&zhV)) {
			res.Rule = RuleZhSoft
		}
	default:
		for si, ks := range r.extra {
			kws := ks.Keywords
			if len(kws) == 0 && ks.Name == FreshnessName {
				kws, ks.Whole = Freshness.Keywords, Freshness.Whole
			}
			for _, kw := range kws {
				kw = strings.TrimSpace(kw)
				if kw == "" {
					continue
				}
				if kw[0] >= 0x80 {
					if strings.Contains(s, kw) {
						return Result{true, google, "extra:" + ks.Name, kw}
					}
					continue
				}
				for i := range len(s) {
					if lowerRef(s[i]) != lowerRef(kw[0]) || !wordStart(i) {
						continue
					}
					if end, ok := matchRef(s, i, kw); ok && (!ks.Whole || end == len(s) || !isAlnumRef(s[end])) {
						return Result{true, google, "extra:" + r.extra[si].Name, kw}
					}
				}
			}
		}
		return Result{}
	}
	res.WebSearch, res.GooglePreferred = true, google
	return res
}

// matchRef is matchFold written the obvious way: bytes compared after lower-casing
// A-Z, a run of spaces in kw matching a run of ASCII white space in s.
func matchRef(s string, i int, kw string) (int, bool) {
	for k := 0; k < len(kw); {
		if kw[k] == ' ' {
			for k < len(kw) && kw[k] == ' ' {
				k++
			}
			if i >= len(s) || !spaceRef(s[i]) {
				return 0, false
			}
			for i < len(s) && spaceRef(s[i]) {
				i++
			}
			continue
		}
		if i >= len(s) || lowerRef(s[i]) != lowerRef(kw[k]) {
			return 0, false
		}
		i++
		k++
	}
	return i, true
}

func lowerRef(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + 32
	}
	return b
}

func spaceRef(b byte) bool { return strings.IndexByte(" \t\n\v\f\r", b) >= 0 }

func isAlnumRef(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
}

func TestDefaultKeywordSets(t *testing.T) {
	t.Parallel()
	if got := DefaultKeywordSets(); len(got) != 1 || got[0].Name != FreshnessName || !got[0].Whole {
		t.Errorf("DefaultKeywordSets() = %+v, want [Freshness]", got)
	}
	custom := KeywordSet{Name: "zh", Keywords: []string{"天气"}}
	if got := DefaultKeywordSets(custom); len(got) != 2 || got[0].Name != "zh" || got[1].Name != FreshnessName {
		t.Errorf("configured sets come first, then Freshness: %+v", got)
	}
	own := KeywordSet{Name: FreshnessName, Keywords: []string{"breaking news"}}
	if got := DefaultKeywordSets(custom, own); len(got) != 2 || got[1].Keywords[0] != "breaking news" {
		t.Errorf("a configured freshness set replaces the built-in one: %+v", got)
	}
	in := []KeywordSet{custom}
	DefaultKeywordSets(in...)[0].Name = "changed"
	if in[0].Name != "zh" {
		t.Error("DefaultKeywordSets shares its argument's backing array")
	}
}
