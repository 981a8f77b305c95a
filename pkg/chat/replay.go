package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/search"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Records is where the chat worker finds recorded search results, by content address
// (search.Address); the search worker records every complete result. *state.Store is
// the Redis one.
type Records interface {
	// RecordSearch records a result of a job under its address (and its batch's).
	RecordSearch(ctx context.Context, jobID, addr string, result []byte) error
	// RecordedSearches returns all of a job's recorded results by address.
	RecordedSearches(ctx context.Context, jobID string) (map[string][]byte, error)
	// RecordedSearch looks addresses up among a job's and then its batch's results.
	RecordedSearch(ctx context.Context, jobID, batchID string, addrs []string) (found map[string][]byte, inBatch map[string]bool, err error)
}

var _ Records = (*state.Store)(nil)

// How a call answered from a record says so (call.Recorded, the trace's "worker").
const (
	recordedReplay = "replay" // from the replayed job's record
	recordedDedupe = "dedupe" // from this job's or its batch's record: a repeated search
)

// fromRecord answers a hop's planned searches from recorded results, before the calls
// are stored and published, and returns the calls with how many searches remain to
// pay for:
//
//   - a replay job (job.ReplayOf) never searches: a call whose address the original
//     job recorded gets that result, at no cost; any other gets SEARCH_NOT_RECORDED,
//     naming the searches the record has, for the model to read;
//   - any other job answers a search it (or its batch) already made from that record:
//     the same search is paid for once. Identical searches still in flight (the same
//     hop, or a concurrent job of the batch) are each paid for: nothing waits.
//
// A call answered here becomes a local call, its result stored with the hop's calls,
// so a redelivered dispatch answers it the same way. Results taken from another job's
// record are recorded in this job's too, so its trace's addresses resolve.
func (w *Worker) fromRecord(ctx context.Context, v *view, calls []call, searches int) ([]call, int, error) {
	if w.Records == nil || searches == 0 {
		return calls, searches, nil
	}
	addrs := make([]string, 0, len(calls))
	for _, c := range calls {
		if !c.Local && c.Tool == "" {
			addrs = append(addrs, search.Address(c.Engine, c.Query))
		}
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
		if c.Local || c.Tool != "" {
			continue // answered already, or not a search (a fetch is not recorded)
		}
		addr := search.Address(c.Engine, c.Query)
		var res engines.Result
		if b, ok := found[addr]; ok && json.Unmarshal(b, &res) == nil && search.Complete(&res) {
			if replay || foreign[addr] {
				if err := w.Records.RecordSearch(ctx, v.job.ID, addr, b); err != nil {
					return nil, 0, err
				}
			}
			res.Usage = engines.Usage{} // recorded: nothing is paid
			c.Local, c.Result = true, &res
		} else if replay {
			c.Local, c.Result = true, notRecorded(found)
		} else {
			continue
		}
		c.Recorded = recordedDedupe
		if replay {
			c.Recorded = recordedReplay
		}
		if w.Metrics != nil {
			w.Metrics.Searches.WithLabelValues(c.Engine, c.Recorded).Inc()
		}
		searches--
	}
	return calls, searches, nil
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
	slices.Sort(qs)
	list := "none"
	if len(qs) > 0 {
		list = strings.Join(slices.Compact(qs), ", ")
	}
	return engines.InvalidArgumentsResult("SEARCH_NOT_RECORDED", "This search was not made by the job being replayed.",
		fmt.Sprintf("This is a replay; only the original searches are available: %s. Search again with one of those queries, or answer with the results you have.", list))
}

// traceRecord fills a trace entry's content address (a complete result the search
// worker or a record gave) and, for a call answered from a record, names the record
// in the entry's worker.
func traceRecord(e *traceEntry, c call, res *engines.Result) {
	if c.Tool != "" {
		return // only searches are recorded
	}
	if search.Complete(res) && (!c.Local || c.Recorded != "") {
		e.Result = search.Address(c.Engine, c.Query)
	}
	if c.Recorded != "" {
		e.Worker = c.Recorded
	}
}
