package intent

import (
	"reflect"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/engines"
)

func TestParseValid(t *testing.T) {
	t.Parallel()
	one := mustToolset(t, oneEngine)
	def := mustToolset(t, twoEnginesDefault)
	noDef := mustToolset(t, twoEnginesNoDefault)
	many := mustToolset(t, manyEngines)
	q := func(query string) engines.Query {
		return engines.Query{Query: query, Recency: engines.NoLimit, Count: engines.DefaultCount}
	}
	cases := []struct {
		name   string
		ts     *Toolset
		args   string
		google bool
		want   Call
	}{
		{"seed example", noDef, `{"engine":"glm","query":"今天的国际新闻头条","count":3}`, false,
			Call{Engine: "glm", Query: engines.Query{Query: "今天的国际新闻头条", Recency: engines.NoLimit, Count: 3}}},
		{"only engine", one, `{"query":"go 1.26"}`, false, Call{Engine: "glm", Query: q("go 1.26")}},
		{"only engine, google-preferred", one, `{"query":"go 1.26"}`, true, Call{Engine: "glm", Query: q("go 1.26")}},
		{"default engine", def, `{"query":"go 1.26"}`, false, Call{Engine: "glm", Query: q("go 1.26")}},
		{"named over default", def, `{"query":"go 1.26","engine":"google"}`, false, Call{Engine: "google", Query: q("go 1.26")}},
		{"narrowed to one", noDef, `{"query":"go 1.26"}`, true, Call{Engine: "google", Query: q("go 1.26")}},
		{"named in the narrowed set", many, `{"query":"x","engine":"cli"}`, true, Call{Engine: "cli", Query: q("x")}},
		{"case-insensitive engine", noDef, `{"query":"x","engine":" GLM "}`, false, Call{Engine: "glm", Query: q("x")}},
		{"null and empty fields are absent", def,
			`{"query":"x","engine":"","recency":null,"count":null,"allowed_domains":null,"blocked_domains":[]}`, false, Call{Engine: "glm", Query: q("x")}},
		{"trimmed query", one, "{\"query\":\"  spaced out \\n\"}", false, Call{Engine: "glm", Query: q("spaced out")}},
		{"all fields", noDef, `{"engine":"google","query":"ECB rate","recency":"ONEWEEK","count":5.0,
			"allowed_domains":["Reuters.com","https://www.bbc.co.uk/news","*.ft.com.","reuters.com"],
			"blocked_domains":["example.org"]}`, false,
			Call{Engine: "google", Query: engines.Query{Query: "ECB rate", Recency: engines.OneWeek, Count: 5,
				AllowedDomains: []string{"reuters.com", "bbc.co.uk", "ft.com"}, BlockedDomains: []string{"example.org"}}}},
		{"count 1e1", one, `{"query":"x","count":1e1}`, false, Call{Engine: "glm", Query: engines.Query{Query: "x", Recency: engines.NoLimit, Count: 10}}},
		{"count limits", one, `{"query":"x","count":50}`, false, Call{Engine: "glm", Query: engines.Query{Query: "x", Recency: engines.NoLimit, Count: 50}}},
		{"double-encoded", one, `"{\"query\":\"x\"}"`, false, Call{Engine: "glm", Query: q("x")}},
		{"unicode domain", one, `{"query":"x","allowed_domains":["例子.中国"]}`, false,
			Call{Engine: "glm", Query: engines.Query{Query: "x", Recency: engines.NoLimit, Count: 10, AllowedDomains: []string{"例子.中国"}}}},
		{"long query in characters", one, `{"query":"` + strings.Repeat("新", MaxQueryChars) + `"}`, false, Call{Engine: "glm", Query: q(strings.Repeat("新", MaxQueryChars))}},
	}
	for _, c := range cases {
		got, err := c.ts.Parse(c.args, c.google)
		if err != nil {
			t.Errorf("%s: Parse(%s) error %v", c.name, c.args, err)
			continue
		}
		got.Choice = "" // how the engine was chosen has its own test (TestEngineChoice)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: Parse(%s) = %+v, want %+v", c.name, c.args, got, c.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	one := mustToolset(t, oneEngine)
	noDef := mustToolset(t, twoEnginesNoDefault)
	many := mustToolset(t, manyEngines)
	cases := []struct {
		name    string
		ts      *Toolset
		args    string
		google  bool
		typ     string
		details []string // substrings of Details
	}{
		{"empty", one, "", false, InvalidQuery, []string{"Missing 'query'"}},
		{"not JSON", one, `{"query":`, false, InvalidToolArguments, []string{"not valid JSON", `{"query": "latest Go release"}`}},
		{"array", one, `["query"]`, false, InvalidToolArguments, []string{"not a JSON object"}},
		{"number", one, `42`, false, InvalidToolArguments, []string{"not a JSON object"}},
		{"null", one, `null`, false, InvalidToolArguments, []string{"not a JSON object"}},
		{"string", one, `"search for cats"`, false, InvalidToolArguments, []string{"not a JSON object"}},
		{"trailing data", one, `{"query":"x"} {}`, false, InvalidToolArguments, []string{"not valid JSON"}},
		{"too large", one, `{"query":"` + strings.Repeat("x", MaxArgumentsBytes) + `"}`, false, InvalidToolArguments, []string{"bytes long"}},
		{"unknown keys", one, `{"query":"x","foo":1,"bar":2}`, false, InvalidToolArguments,
			[]string{"Unknown argument(s): bar, foo, only 'query', 'engine', 'recency', 'count', 'allowed_domains', 'blocked_domains', 'max_age', 'cache', 'strict' supported."}},
		{"many unknown keys", one, `{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1,"i":1,"j":1,"k":1,"l":1}`, false, InvalidToolArguments,
			[]string{"a, b, c, d, e, f, g, h, i, j (and 2 more)"}},
		{"query missing", one, `{"count":3}`, false, InvalidQuery, []string{"Missing 'query'"}},
		{"query null", one, `{"query":null}`, false, InvalidQuery, []string{"Missing 'query'"}},
		{"query not a string", one, `{"query":["a"]}`, false, InvalidQuery, []string{"must be a string"}},
		{"query empty", one, `{"query":""}`, false, InvalidQuery, []string{"empty"}},
		{"query blank", one, `{"query":" \t\n "}`, false, InvalidQuery, []string{"empty"}},
		{"query too long", one, `{"query":"` + strings.Repeat("a", MaxQueryChars+1) + `"}`, false, InvalidQuery, []string{"1001 characters", "at most 1000"}},
		{"engine unknown", noDef, `{"query":"x","engine":"bing"}`, false, InvalidEngine,
			[]string{`Unknown engine "bing"`, "glm (GLM 4.7 – better for Chinese / domestic news), google (Gemini – broader global web coverage)"}},
		{"engine not offered when google-preferred", noDef, `{"query":"x","engine":"glm"}`, true, InvalidEngine,
			[]string{`Unknown engine "glm"`, "use one of: google (Gemini"}},
		{"engine not a string", noDef, `{"query":"x","engine":1}`, false, InvalidEngine, []string{"must be a string"}},
		{"engine required", noDef, `{"query":"x"}`, false, EngineRequired,
			[]string{"call web_search again with 'engine' set to one of: glm (GLM 4.7 – better for Chinese / domestic news), google (Gemini"}},
		{"engine required in the narrowed set", many, `{"query":"x"}`, true, EngineRequired,
			[]string{"one of: gem, cli, ag, vertex, MyGoogle."}},
		{"recency unknown", one, `{"query":"x","recency":"yesterday"}`, false, InvalidToolArguments, []string{"oneDay, oneWeek", `"yesterday"`}},
		{"recency not a string", one, `{"query":"x","recency":1}`, false, InvalidToolArguments, []string{"'recency' must be one of"}},
		{"count zero", one, `{"query":"x","count":0}`, false, InvalidToolArguments, []string{"integer from 1 to 50", "not 0"}},
		{"count too big", one, `{"query":"x","count":51}`, false, InvalidToolArguments, []string{"not 51"}},
		{"count fraction", one, `{"query":"x","count":2.5}`, false, InvalidToolArguments, []string{"not 2.5"}},
		{"count negative", one, `{"query":"x","count":-3}`, false, InvalidToolArguments, []string{"not -3"}},
		{"count string", one, `{"query":"x","count":"5"}`, false, InvalidToolArguments, []string{`not the string "5"`}},
		{"count huge", one, `{"query":"x","count":1e400}`, false, InvalidToolArguments, []string{"not 1e400"}},
		{"count bool", one, `{"query":"x","count":true}`, false, InvalidToolArguments, []string{"not true"}},
		{"domains not an array", one, `{"query":"x","allowed_domains":"reuters.com"}`, false, InvalidToolArguments,
			[]string{"'allowed_domains' must be an array of host names"}},
		{"domain not a string", one, `{"query":"x","blocked_domains":[1]}`, false, InvalidToolArguments, []string{"'blocked_domains'", "1 is not a string"}},
		{"domain with a path", one, `{"query":"x","allowed_domains":["reuters.com/world"]}`, false, InvalidToolArguments, []string{`"reuters.com/world" is not a host name`}},
		{"domain with a space", one, `{"query":"x","allowed_domains":["reuters com"]}`, false, InvalidToolArguments, []string{"not a host name"}},
		{"domain with a port", one, `{"query":"x","allowed_domains":["https://reuters.com:8443"]}`, false, InvalidToolArguments, []string{"not a host name"}},
		{"domain empty", one, `{"query":"x","allowed_domains":[""]}`, false, InvalidToolArguments, []string{"not a host name"}},
		{"domain label", one, `{"query":"x","allowed_domains":["-bad.com"]}`, false, InvalidToolArguments, []string{"not a host name"}},
		{"too many domains", one, `{"query":"x","allowed_domains":["a.com","b.com","c.com","d.com","e.com","f.com","g.com","h.com","i.com","j.com","k.com","l.com","m.com","n.com","o.com","p.com","q.com","r.com","s.com","t.com","u.com"]}`,
			false, InvalidToolArguments, []string{"at most 20", "got 21"}},
	}
	for _, c := range cases {
		_, err := c.ts.Parse(c.args, c.google)
		if err == nil {
			t.Errorf("%s: Parse(%.60s) accepted", c.name, c.args)
			continue
		}
		if err.Type != c.typ {
			t.Errorf("%s: type %s, want %s (%s)", c.name, err.Type, c.typ, err.Details)
		}
		for _, s := range c.details {
			if !strings.Contains(err.Details, s) {
				t.Errorf("%s: details %q lack %q", c.name, err.Details, s)
			}
		}
		if err.Display == "" || len(err.Details) > 1000 {
			t.Errorf("%s: display %q, details %d bytes", c.name, err.Display, len(err.Details))
		}
		res := err.Result()
		if res.Citation.Error == nil || res.Citation.Error.Type != c.typ || res.Citation.Error.Message != err.Details ||
			res.Citation.ReturnDisplay != err.Display || res.Citation.LLMContent != "Error: "+err.Display+"\n\nDetails: "+err.Details {
			t.Errorf("%s: Result() = %+v", c.name, res.Citation)
		}
		if !strings.Contains(err.Error(), c.typ) {
			t.Errorf("%s: Error() = %q", c.name, err.Error())
		}
	}
}

func TestHostName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Reuters.COM":              "reuters.com",
		" bbc.co.uk. ":             "bbc.co.uk",
		"*.example.org":            "example.org",
		"http://Example.com":       "example.com",
		"https://example.com/a?b":  "example.com",
		"gov":                      "gov",
		"xn--fsqu00a.xn--fiqs8s":   "xn--fsqu00a.xn--fiqs8s",
		"a-b.c":                    "a-b.c",
		"example.com/a":            "",
		"user@example.com":         "",
		"https://user@example.com": "",
		"a..b":                     "",
		".":                        "",
		"a_b.com":                  "",
		"ftp://example.com":        "",
		strings.Repeat("a", 64):    "",
	} {
		got, ok := hostName(in)
		if ok != (want != "") || got != want {
			t.Errorf("hostName(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}
