package intent

import (
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/engines"
)

// When the fleet chooses the engine, a search carrying an option the chosen engine
// would weaken goes to the first engine that meets it; an engine the model named
// stays, and so does the default when no engine meets the option or none is missed.
func TestRouteByOptions(t *testing.T) {
	t.Parallel()
	caps := engines.KindCapabilities()
	cf, brave, searx := caps["cloudflare"], caps["brave"], caps["searxng"]
	ts := mustToolset(t, Config{Engines: []Engine{
		{ID: "cheap", Kind: "cloudflare", Default: true, Honours: &cf},
		{ID: "meta", Kind: "searxng", Honours: &searx},
		{ID: "full", Kind: "brave", Honours: &brave},
	}})
	for _, tc := range []struct {
		args, engine, choice string
	}{
		{`{"query":"tide tables"}`, "cheap", ChoiceDefault},
		{`{"query":"tide tables","count":3,"allowed_domains":["a.example"]}`, "cheap", ChoiceDefault}, // the fleet applies both
		{`{"query":"tide tables","recency":"oneWeek"}`, "meta", ChoiceOptions + "recency"},
		{`{"query":"tide tables","recency":"oneWeek","engine":"cheap"}`, "cheap", ChoiceModel},
	} {
		c, aerr := ts.Parse(tc.args, false)
		if aerr != nil {
			t.Fatalf("%s: %v", tc.args, aerr)
		}
		if c.Engine != tc.engine || c.Choice != tc.choice {
			t.Errorf("%s: engine %s (%s), want %s (%s)", tc.args, c.Engine, c.Choice, tc.engine, tc.choice)
		}
	}
	// A request's own country (applied after the model's arguments) is routed again.
	c, _ := ts.Parse(`{"query":"tide tables","recency":"oneWeek"}`, false)
	c.Query.Country = "FR"
	if got := ts.Route(c, false); got.Engine != "full" || !strings.Contains(got.Choice, "country") {
		t.Errorf("recency and country: engine %s (%s), want full", got.Engine, got.Choice)
	}
	// No engine meets context_size: the default stays, and the search will say so.
	c, _ = ts.Parse(`{"query":"tide tables"}`, false)
	c.Query.ContextSize = "high"
	if got := ts.Route(c, false); got.Engine != "cheap" {
		t.Errorf("an option no engine meets: engine %s, want the default", got.Engine)
	}
}
