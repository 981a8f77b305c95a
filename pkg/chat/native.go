package chat

import (
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// A model that runs its provider's own search (a model caller with native search)
// reports it in its answer's llm.NativeKey field. The job record counts those searches
// like the fleet's: a trace entry each (engine "native:<protocol>"), their cost in the
// usage, and the cited pages as the sources the answer's [n] markers number.

// nativeSources returns the sources the final answer's markers number: its native
// search's cited pages when the model searched itself in that answer, else srcs.
func nativeSources(t *turn, srcs *sources) *sources {
	if t == nil || t.Native == nil || len(t.Native.Sources) == 0 {
		return srcs // the model did not search itself
	}
	out := &sources{}
	for _, s := range t.Native.Sources {
		out.add(engines.Source{Web: engines.Web{URI: s.URL, Title: engines.PlainText(s.Title)}})
	}
	return out
}

// addNative appends the chain's native searches (hops 0..last) to its trace and usage.
func (v *view) addNative(last int, trace []traceEntry, u engines.Usage) ([]traceEntry, engines.Usage) {
	for h := 0; h <= last; h++ {
		t, _ := v.turn(h)
		if t == nil || t.Native == nil {
			continue // the model did not search itself
		}
		n := t.Native
		// The billed requests and their price are spread over the searches that ran:
		// Gemini bills one grounded answer however many queries it made, so its trace
		// entries share one search's price (the entries add up to the usage).
		ran := 0
		for _, q := range n.Searches {
			if q.Error == "" {
				ran++
			}
		}
		per, billed := 0.0, n.Requests
		if ran > 0 {
			per = n.CostUSD / float64(ran)
		}
		titles := map[string]string{}
		for _, s := range n.Sources {
			titles[s.URL] = engines.PlainText(s.Title) // a provider's title is a page's: no markup
		}
		for _, q := range n.Searches {
			e := traceEntry{Hop: h, CallID: q.ID, Engine: "native:" + n.Protocol, Query: q.Query, Sources: []wire.TraceSource{}}
			for _, u := range q.URLs {
				e.Sources = append(e.Sources, wire.TraceSource{URL: u, Title: titles[u]})
			}
			if q.Error != "" {
				e.Error = "NATIVE_SEARCH_FAILED: " + q.Error
			} else {
				searches := 0
				if billed > 0 {
					searches, billed = 1, billed-1
				}
				e.Usage = engines.Usage{Searches: searches, CostUSD: per}
			}
			trace = append(trace, e)
		}
		u.Searches += n.Requests
		u.CostUSD += n.CostUSD
	}
	return trace, u
}
