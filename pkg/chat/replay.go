package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/intent"
	"github.com/searchfleet/searchfleet/pkg/search"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Records is where the chat worker finds recorded search results and fetched pages,
// by content address (search.Address, search.FetchAddress); the search worker records
// every complete result, the fetch worker every page a server answered with. *state.Store is
// the Redis one.
type Records interface {
	// RecordSearch records a result of a job under its address (and its batch's).
	RecordSearch(ctx context.Context, jobID, addr string, result []byte) error
	// RecordedSearches returns all of a job's recorded results by address.
	RecordedSearches(ctx context.Context, jobID string) (map[string][]byte, error)
	// RecordedSearch looks addresses up among a job's and then its batch's results.
	RecordedSearch(ctx context.Context, jobID, batchID string, addrs []string) (found map[string][]byte, inBatch map[string]bool, err error)
}

var _ Records = (*state.Searches)(nil)

// How a call answered from a record says so (call.Recorded, the trace's "worker").
const (
	recordedReplay = "replay" // from the replayed job's record
	recordedDedupe = "dedupe" // from this job's or its batch's record: a repeated search
)

// fromRecord answers a hop's planned searches and fetches from recorded results,
// before the calls are stored and published, and returns the calls with how many
// searches remain to pay for:
//
//   - a replay job (job.ReplayOf) never searches nor fetches: a call whose address
//     the original job recorded gets that result (a fetch, the page the original
//     read), at no cost; any other gets SEARCH_NOT_RECORDED or FETCH_NOT_RECORDED,
//     naming the searches or pages the record has, for the model to read;
//   - any other job answers a search or fetch it (or its batch) already made from
//     that record: the same search is paid for once, the same page read once.
//     Identical calls still in flight (the same hop, or a concurrent job of the
//     batch) each run: nothing waits.
//
// A call answered here becomes a local call, its result (and a fetch's page) stored
// with the hop's calls, so a redelivered dispatch answers it the same way. Results
// taken from another job's record are recorded in this job's too, so its trace's
// addresses resolve and a replay of this job finds them.
//
// A job that is neither a replay nor a batch's line has nothing recorded before its
// first dispatch (its record is written by the searches and fetches it dispatched),
// so its record is looked at only from the hop after one that dispatched calls: a
// one-search job pays no lookup.
func (w *Worker) fromRecord(ctx context.Context, v *view, h int, calls []call, searches int) ([]call, int, error) {
	if w.Records == nil {
		return calls, searches, nil
	}
	if v.job.ReplayOf == "" && v.job.Batch == "" && !dispatchedBefore(v.chain, h) {
		return calls, searches, nil
	}
	addrs := make([]string, 0, len(calls))
	for _, c := range calls {
		if a := recordAddress(c); a != "" && !c.Local {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return calls, searches, nil
	}
	replay := v.job.ReplayOf != ""
	var found map[string][]byte
	var foreign map[string]bool // found in another job's record
	var err error
	if replay {
		found, err = w.Records.RecordedSearches(ctx, v.job.ReplayOf)
	} else {
		found, foreign, err = w.Records.RecordedSearch(ctx, v.job.ID, v.job.Batch, addrs)
	}
	if err != nil {
		return nil, 0, err
	}
	for i := range calls {
		c := &calls[i]
		addr := recordAddress(*c)
		if c.Local || addr == "" {
			continue // answered already, or a tool whose calls are not recorded
		}
		b, ok := found[addr]
		switch {
		case ok && answerFromRecord(c, b):
			if replay || foreign[addr] {
				if err := w.Records.RecordSearch(ctx, v.job.ID, addr, b); err != nil {
					return nil, 0, err
				}
			}
		case replay && c.Tool == "":
			c.Local, c.Result = true, notRecorded(found)
		case replay:
			c.Local, c.Result = true, fetchNotRecorded(c.URL, found)
		default:
			continue
		}
		c.Recorded = recordedDedupe
		if replay {
			c.Recorded = recordedReplay
		}
		if c.Tool != "" {
			if w.Metrics != nil {
				w.Metrics.Fetches.WithLabelValues(c.Recorded).Inc()
			}
			continue // a fetch is not one of the searches paid for
		}
		if w.Metrics != nil {
			w.Metrics.Searches.WithLabelValues(c.Engine, c.Recorded).Inc()
		}
		searches--
	}
	return calls, searches, nil
}

// dispatchedBefore reports whether a hop before h recorded calls.
func dispatchedBefore(c *state.Chain, h int) bool {
	for k, hp := range c.Hops {
		if k < h && hp.Calls != nil {
			return true
		}
	}
	return false
}

// recordAddress is the content address a call's result is recorded under: a
// search's (search.Address) or a fetch's (search.FetchAddress); "" for a tool whose
// calls are not recorded.
func recordAddress(c call) string {
	switch c.Tool {
	case "":
		return search.Address(c.Engine, c.Query)
	case intent.FetchToolName:
		return search.FetchAddress(c.URL)
	}
	return ""
}

// answerFromRecord makes c a local call answered by the recorded result b, and
// reports whether b could answer it: a complete search result for a search, a
// recorded page for a fetch.
func answerFromRecord(c *call, b []byte) bool {
	if c.Tool == intent.FetchToolName {
		rec, ok := search.ReadFetchRecord(b)
		if !ok {
			return false
		}
		rec.Result.Usage = engines.Usage{}
		c.Local, c.Result, c.Page = true, &rec.Result, rec.Page
		return true
	}
	var res engines.Result
	if json.Unmarshal(b, &res) != nil || !search.Complete(&res) {
		return false
	}
	res.Usage = engines.Usage{} // recorded: nothing is paid
	c.Local, c.Result = true, &res
	return true
}

// notRecorded is the result of a replay's search the original job did not make.
func notRecorded(record map[string][]byte) *engines.Result {
	var qs []string
	for _, b := range record {
		var r engines.Result
		if json.Unmarshal(b, &r) == nil && r.Query != "" {
			qs = append(qs, strconv.Quote(r.Query))
		}
	}
	return engines.InvalidArgumentsResult("SEARCH_NOT_RECORDED", "This search was not made by the job being replayed.",
		fmt.Sprintf("This is a replay; only the original searches are available: %s. Search again with one of those queries, or answer with the results you have.", listed(qs)))
}

// fetchNotRecorded is the result of a replay's fetch of a page the original job did
// not read.
func fetchNotRecorded(u string, record map[string][]byte) *engines.Result {
	var us []string
	for _, b := range record {
		if rec, ok := search.ReadFetchRecord(b); ok {
			us = append(us, strconv.Quote(rec.Page.URL))
		}
	}
	res := engines.InvalidArgumentsResult("FETCH_NOT_RECORDED", "This page was not fetched by the job being replayed.",
		fmt.Sprintf("This is a replay; only the original fetches are available: %s. Fetch one of those URLs, or answer with what you have.", listed(us)))
	res.Engine, res.Query = search.FetchEngine, u
	return res
}

// listed is what a replay's record holds, for the model: the quoted queries or URLs
// in order, each once, or "none".
func listed(quoted []string) string {
	if len(quoted) == 0 {
		return "none"
	}
	slices.Sort(quoted)
	return strings.Join(slices.Compact(quoted), ", ")
}

// traceRecord fills a trace entry's content address (a complete result the search
// or fetch worker or a record gave) and, for a call answered from a record, names the record
// in the entry's worker.
func traceRecord(e *traceEntry, c call, res *engines.Result) {
	addr := recordAddress(c)
	if addr == "" {
		return // a tool whose calls are not recorded
	}
	if search.Complete(res) && (!c.Local || c.Recorded != "") {
		e.Result = addr
	}
	if c.Recorded != "" {
		e.Worker = c.Recorded
	}
}
