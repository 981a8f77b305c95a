package intent

// The keyword tables of the built-in rules (seed 000, "Search intent route"). They are
// constant data: nothing in the package writes to them.
//
// Every English phrase is lower case and matches case-insensitively (ASCII folding) at
// a word start: the byte before it is not an ASCII letter or digit. A space in a phrase
// matches any run of ASCII white space ("search  the\nweb"). A phrase marked whole must
// also end at a word end (the byte after it is not an ASCII letter or digit); the others
// match as prefixes, so "search" finds "searching", "news" finds "newsletter" and
// "website" finds "websites". Chinese phrases match as plain substrings: Chinese has
// no word boundaries and no case.

// kind says what a matched phrase contributes to the decision.
type kind uint8

const (
	hard   kind = iota + 1 // a hit on its own
	verb                   // a soft hit together with a noun
	noun                   // a soft hit together with a verb
	direct                 // a soft hit on its own (上网)
	brand                  // no hit on its own; marks a hit as Google-preferred (谷歌)
)

// phrase is one keyword of the built-in rules.
type phrase struct {
	text   string // lower case; a space matches a run of ASCII white space
	kind   kind
	id     uint8 // for verbs and nouns: the index into verbNames or nounNames
	whole  bool  // must end at a word end ("web", not "webpack")
	google bool  // asks for Google: the hit becomes Google-preferred
}

// gate groups the English phrases that share a first word stem, so classify
// compares one stem per word and looks at the phrases only when the stem matched.
type gate struct {
	stem    string // a prefix of every phrase in the gate
	phrases []phrase
}

// Hard phrase ids: indexes into enHard. Of several hard phrases in one text, the one
// with the lowest id is reported.
const (
	hSlashSearch uint8 = iota
	hWebSearch
	hWebDashSearch
	hWebsearch
	hInternetSearch
	hInternetDashSearch
	hOnlineSearch
	hSearchTheWeb
	hSearchTheNet
	hSearchTheInternet
	hSearchOnline
	hSearchOnTheWeb
	hSearchOnTheInternet
	hGoogleSearch
	hGoogleIt
	hGoogleThe
	hGoogleFor
	hGoogleHow
	hGoogleWhat
	hGoogleWhen
	hGoogleWhere
	hGoogleWhich
	hGoogleWho
	hGoogleWhy
	hYouGoogle
	hPleaseGoogle
	numHard
)

// enHard are the English hard phrases by id, as reported in Result.Match.
var enHard = [numHard]string{
	"/search", "web search", "web-search", "websearch", "internet search", "internet-search",
	"online search", "search the web", "search the net", "search the internet", "search online",
	"search on the web", "search on the internet", "google search", "google it",
	"google the", "google for", "google how", "google what", "google when", "google where",
	"google which", "google who", "google why", "you google", "please google",
}

// Verb and noun ids: indexes into verbNames, nounNames and softMatch. English and
// Chinese verbs and nouns combine freely (see Classify); of several verbs (nouns) in
// one text, the one with the lowest id is reported.
const (
	vSearch uint8 = iota
	vFind
	vLookUp
	vLookFor
	vGoogle
	vZhSousuo  // 搜索
	vZhChazhao // 查找
	vZhSou     // 搜
	numVerbs
)

const (
	nWeb uint8 = iota
	nWebsite
	nWebpage
	nInternet
	nOnline
	nNews
	nInformation
	nInfo
	nReport
	nArticle
	nZhWangluo  // 网络
	nZhLianwang // 联网
	nZhXinwen   // 新闻
	nZhXinxi    // 信息
	nZhBaodao   // 报道
	numNouns
)

// zhVerbs and zhNouns are the sets (bit per id) of the Chinese verbs and nouns.
const (
	zhVerbs = 1<<vZhSousuo | 1<<vZhChazhao | 1<<vZhSou
	zhNouns = 1<<nZhWangluo | 1<<nZhLianwang | 1<<nZhXinwen | 1<<nZhXinxi | 1<<nZhBaodao
)

// verbNames and nounNames are the canonical spellings reported in Result.Match.
var (
	verbNames = [numVerbs]string{"search", "find", "look up", "look for", "google", "搜索", "查找", "搜"}
	nounNames = [numNouns]string{"web", "website", "webpage", "internet", "online", "news", "information", "info", "report", "article", "网络", "联网", "新闻", "信息", "报道"}
)

// enGates holds the English phrases by the lower-case letter they start with, except
// "/search", which classify finds by its '/'.
//
// Hard hits (the seed's list plus the family members it implies with "等常见短语"):
// /search, web search, web-search, websearch, internet search, internet-search,
// online search, search the web, search the net, search the internet, search online,
// search on the web, search on the internet, google search, google it. The last two
// are Google-preferred, as the English counterparts of 谷歌搜索 and 谷歌一下. So is
// "google" used as a verb ("google the Go 1.26 release notes", "can you google how
// …"): "google" followed by the, for, how, what, when, where, which, who or why, or
// preceded by "you" or "please". The seed's verb+noun rule misses these requests,
// which name what to search for instead of a noun from its list; the company
// ("Google released …", "Google's new phone") is not followed by those words.
//
// Verbs: search; find; look up (also looks up, looking up, looked up, look it up,
// lookup); look for (also looks for, looking for, looked for); google (also googling).
// The "look" forms are whole phrases so "look forward" and "look upon" are not verbs.
//
// Nouns: web (whole word, so webpack, webhook, websocket, webkit are not the web),
// website, webpage, internet, online, news, information, info, report (covers
// reports), article (covers articles).
var enGates = [26][]gate{
	0: {{"article", []phrase{
		{text: "article", kind: noun, id: nArticle},
	}}},
	'f' - 'a': {{"find", []phrase{
		{text: "find", kind: verb, id: vFind},
	}}},
	'g' - 'a': {{"googl", []phrase{
		{text: "google search", kind: hard, id: hGoogleSearch, google: true},
		{text: "google it", kind: hard, id: hGoogleIt, whole: true, google: true},
		{text: "google the", kind: hard, id: hGoogleThe, whole: true, google: true},
		{text: "google for", kind: hard, id: hGoogleFor, whole: true, google: true},
		{text: "google how", kind: hard, id: hGoogleHow, whole: true, google: true},
		{text: "google what", kind: hard, id: hGoogleWhat, whole: true, google: true},
		{text: "google when", kind: hard, id: hGoogleWhen, whole: true, google: true},
		{text: "google where", kind: hard, id: hGoogleWhere, whole: true, google: true},
		{text: "google which", kind: hard, id: hGoogleWhich, whole: true, google: true},
		{text: "google who", kind: hard, id: hGoogleWho, whole: true, google: true},
		{text: "google why", kind: hard, id: hGoogleWhy, whole: true, google: true},
		{text: "google", kind: verb, id: vGoogle, google: true},
		{text: "googling", kind: verb, id: vGoogle, google: true},
	}}},
	'i' - 'a': {
		{"internet", []phrase{
			{text: "internet search", kind: hard, id: hInternetSearch},
			{text: "internet-search", kind: hard, id: hInternetDashSearch},
			{text: "internet", kind: noun, id: nInternet},
		}},
		{"info", []phrase{
			{text: "information", kind: noun, id: nInformation},
			{text: "info", kind: noun, id: nInfo},
		}},
	},
	'l' - 'a': {{"look", []phrase{
		{text: "look up", kind: verb, id: vLookUp, whole: true},
		{text: "looks up", kind: verb, id: vLookUp, whole: true},
		{text: "looking up", kind: verb, id: vLookUp, whole: true},
		{text: "looked up", kind: verb, id: vLookUp, whole: true},
		{text: "look it up", kind: verb, id: vLookUp, whole: true},
		{text: "lookup", kind: verb, id: vLookUp},
		{text: "look for", kind: verb, id: vLookFor, whole: true},
		{text: "looks for", kind: verb, id: vLookFor, whole: true},
		{text: "looking for", kind: verb, id: vLookFor, whole: true},
		{text: "looked for", kind: verb, id: vLookFor, whole: true},
	}}},
	'n' - 'a': {{"news", []phrase{
		{text: "news", kind: noun, id: nNews},
	}}},
	'o' - 'a': {{"online", []phrase{
		{text: "online search", kind: hard, id: hOnlineSearch},
		{text: "online", kind: noun, id: nOnline},
	}}},
	'p' - 'a': {{"please", []phrase{
		{text: "please google", kind: hard, id: hPleaseGoogle, google: true},
	}}},
	'r' - 'a': {{"report", []phrase{
		{text: "report", kind: noun, id: nReport},
	}}},
	's' - 'a': {{"search", []phrase{
		{text: "search the web", kind: hard, id: hSearchTheWeb, whole: true},
		{text: "search the net", kind: hard, id: hSearchTheNet, whole: true},
		{text: "search the internet", kind: hard, id: hSearchTheInternet},
		{text: "search online", kind: hard, id: hSearchOnline},
		{text: "search on the web", kind: hard, id: hSearchOnTheWeb, whole: true},
		{text: "search on the internet", kind: hard, id: hSearchOnTheInternet},
		{text: "search", kind: verb, id: vSearch},
	}}},
	'w' - 'a': {{"web", []phrase{
		{text: "web search", kind: hard, id: hWebSearch},
		{text: "web-search", kind: hard, id: hWebDashSearch},
		{text: "websearch", kind: hard, id: hWebsearch},
		{text: "website", kind: noun, id: nWebsite},
		{text: "webpage", kind: noun, id: nWebpage},
		{text: "web", kind: noun, id: nWeb, whole: true},
	}}},
	'y' - 'a': {{"you", []phrase{
		{text: "you google", kind: hard, id: hYouGoogle, google: true},
	}}},
}

// zhGroups holds the Chinese phrases by their first character, exactly the seed's:
// hard hits 谷歌搜索, 谷歌一下, 百度一下 (all three Google-preferred, as the seed says:
// 优先尝试谷歌系搜索后端); 上网 on its own; verbs 搜索, 查找, 搜; nouns 网络, 联网, 新闻, 信息,
// 报道. 谷歌 anywhere marks a hit as Google-preferred, like "google" in English.
var zhGroups = [...]struct {
	first   rune
	phrases []phrase
}{
	{'谷', []phrase{
		{text: "谷歌搜索", kind: hard, google: true},
		{text: "谷歌一下", kind: hard, google: true},
		{text: "谷歌", kind: brand, google: true},
	}},
	{'百', []phrase{{text: "百度一下", kind: hard, google: true}}},
	{'上', []phrase{{text: "上网", kind: direct}}},
	{'搜', []phrase{
		{text: "搜索", kind: verb, id: vZhSousuo},
		{text: "搜", kind: verb, id: vZhSou},
	}},
	{'查', []phrase{{text: "查找", kind: verb, id: vZhChazhao}}},
	{'网', []phrase{{text: "网络", kind: noun, id: nZhWangluo}}},
	{'联', []phrase{{text: "联网", kind: noun, id: nZhLianwang}}},
	{'新', []phrase{{text: "新闻", kind: noun, id: nZhXinwen}}},
	{'信', []phrase{{text: "信息", kind: noun, id: nZhXinxi}}},
	{'报', []phrase{{text: "报道", kind: noun, id: nZhBaodao}}},
}

// softMatch is Result.Match for a verb+noun hit ("search+news"), precomputed so a
// hit does not allocate.
var softMatch = func() (m [numVerbs][numNouns]string) {
	for v, vname := range verbNames {
		for n, nname := range nounNames {
			m[v][n] = vname + "+" + nname
		}
	}
	return m
}()
