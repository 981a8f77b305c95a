package ingress

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/research"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Every non-streamed answer of a completed job or research run says in its headers
// what it cost and how its searches and fetches were answered, the values of its
// body's usage.searchfleet (a direct search's: its result's usage; a direct fetch's:
// its job's usage record; a run's: its usage), so a client, a proxy or a log reads
// them without parsing the body. A streamed answer carries them in its last event's
// usage.
const (
	HeaderCostUSD        = "X-Searchfleet-Cost-Usd"
	HeaderSearches       = "X-Searchfleet-Searches"
	HeaderSearchesCached = "X-Searchfleet-Searches-Cached"
	HeaderFetches        = "X-Searchfleet-Fetches"
	HeaderFetchesCached  = "X-Searchfleet-Fetches-Cached"
)

// setCost sets the cost headers from sp (nil: the answer has no spend, no headers).
func setCost(h http.Header, sp *wire.Spend) {
	if sp == nil {
		return
	}
	h.Set(HeaderCostUSD, strconv.FormatFloat(sp.CostUSD, 'f', -1, 64))
	h.Set(HeaderSearches, strconv.Itoa(sp.Searches))
	h.Set(HeaderSearchesCached, strconv.Itoa(sp.SearchesCached))
	h.Set(HeaderFetches, strconv.Itoa(sp.Fetches))
	h.Set(HeaderFetchesCached, strconv.Itoa(sp.FetchesCached))
}

// recordedSpend is what a completed job's usage record says it spent: a chat job's
// record has usage.searchfleet's fields, a direct search's is its engine's usage
// (cached: a search the cache answered). nil for a job that has not completed or
// has no record.
func recordedSpend(j *state.Job) *wire.Spend {
	if j.Status != state.Completed || len(j.Usage) == 0 {
		return nil
	}
	var u struct {
		wire.Spend
		Cached int `json:"cached"`
	}
	if json.Unmarshal(j.Usage, &u) != nil {
		return nil
	}
	u.SearchesCached += u.Cached
	return &u.Spend
}

// runSpend is what a completed research run spent, from its view's usage: its cost
// and the searches and pages its children read. A run does not count apart the
// searches and pages a cache or a record answered: they are in searches and
// fetches, and the cached counts are 0. nil for a run that has not completed.
func runSpend(run *state.Run, v *research.View) *wire.Spend {
	if run.Status != state.RunCompleted {
		return nil
	}
	u := v.Usage
	return &wire.Spend{Searches: u.Searches, Fetches: u.Fetches, SearchCostUSD: u.SearchUSD, ModelCostUSD: u.ModelUSD, CostUSD: u.CostUSD}
}
