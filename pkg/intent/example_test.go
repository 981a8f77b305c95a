package intent_test

import (
	"fmt"

	"github.com/searchfleet/searchfleet/pkg/intent"
)

func ExampleClassify() {
	for _, text := range []string{
		"Search the web for Go 1.26 release notes",
		"please google the latest news",
		"帮我搜一下最新新闻",
		"谷歌一下 weather",
		"research the history of Rome",
	} {
		r := intent.Classify(text)
		fmt.Printf("%s: web=%v google=%v rule=%q match=%q\n", text, r.WebSearch, r.GooglePreferred, r.Rule, r.Match)
	}
	// Keyword sets fire only when configured; the fleet's classifier has Freshness.
	fleet := intent.NewClassifier(intent.DefaultKeywordSets()...)
	fmt.Println(intent.Classify("weather in Paris today").WebSearch, fleet.Classify("weather in Paris today").Rule)
	// Output:
	// Search the web for Go 1.26 release notes: web=true google=false rule="en-hard" match="search the web"
	// please google the latest news: web=true google=true rule="en-hard" match="google the"
	// 帮我搜一下最新新闻: web=true google=false rule="zh-soft" match="搜+新闻"
	// 谷歌一下 weather: web=true google=true rule="zh-hard" match="谷歌一下"
	// research the history of Rome: web=false google=false rule="" match=""
	// false extra:freshness
}

func ExampleToolset_Parse() {
	ts, err := intent.NewToolset(intent.Config{Engines: []intent.Engine{
		{ID: "glm", ProviderKey: "glm.glm-4.7", Description: "GLM 4.7 – better for Chinese / domestic news"},
		{ID: "google", ProviderKey: "antigravity.acct.gemini-3-flash", Description: "Gemini – broader global web coverage"},
	}})
	if err != nil {
		panic(err)
	}
	r := ts.Classify("谷歌一下 today's headlines")
	fmt.Println(ts.ShouldInject(r, false), ts.IDs(r.GooglePreferred))

	call, aerr := ts.Parse(`{"query":"today's headlines","recency":"oneDay"}`, r.GooglePreferred)
	fmt.Println(call.Engine, call.Query.Query, call.Query.Recency, call.Query.Count, aerr == nil)

	_, aerr = ts.Parse(`{"query":"today's headlines"}`, false)
	fmt.Println(aerr.Type)
	fmt.Println(aerr.Result().Citation.LLMContent)
	// Output:
	// true [google]
	// google today's headlines oneDay 10 true
	// ENGINE_REQUIRED
	// Error: web_search needs an engine.
	//
	// Details: Several search engines are configured and none is the default: call web_search again with 'engine' set to one of: glm (GLM 4.7 – better for Chinese / domestic news), google (Gemini – broader global web coverage).
}
