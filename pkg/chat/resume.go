package chat

import (
	"context"
	"errors"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/intent"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/search"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// HandleResume records a finished search; the result that completes its hop runs the
// next hop. Recording, reading the chain and claiming the next hop take one round trip.
func (w *Worker) HandleResume(ctx context.Context, d *bus.Delivery[search.Done]) error {
	m := d.Msg
	// The result is stored as it arrived: it decoded, so it will again.
	st, err := w.Store.RecordAndLoad(ctx, m.JobID, m.Hop, m.CallID, d.Data, w.ID, w.LeaseTTL)
	if errors.Is(err, state.ErrNotFound) {
		return jobs.Orphan(w.Metrics, w.Log, bus.ConsumerResume, m.JobID)
	}
	if err != nil {
		return err
	}
	ev := bus.Event{JobID: m.JobID, Type: bus.EventSearchDone, At: time.Now().UTC(), Hop: m.Hop, CallID: m.CallID, Engine: m.Engine, Query: m.Result.Query, Sources: len(m.Result.Citation.Sources)}
	if m.Result.Citation.Error != nil {
		ev.Error = m.Result.Citation.Error.Type + ": " + m.Result.Citation.Error.Message
	}
	w.emit(ev)
	w.progress(searchDone(m.JobID, m.Hop, m.CallID, m.Engine, &m.Result))
	if st.Want >= 0 && st.Have < st.Want {
		// Another of the hop's results was stored last: its resume runs the next hop,
		// however many of them are in by now.
		return nil
	}
	return (&step{w: w, st: st, h: m.Hop + 1, last: d.Last(), known: &m}).run(ctx)
}

// searchDone is the live-stream message of a finished search: its pages (URL and
// title, in the engine's order) or its error.
func searchDone(jobID string, h int, callID, engine string, res *engines.Result) bus.StreamMsg {
	m := bus.StreamMsg{JobID: jobID, Type: bus.StreamSearchDone, Hop: h, CallID: callID, Engine: engine, Query: res.Query}
	if engine == search.FetchEngine {
		m.Tool = intent.FetchToolName
	}
	if e := res.Citation.Error; e != nil {
		m.Error = e.Type + ": " + e.Message
		return m
	}
	for _, s := range traceSources(res) { // titled and dated as the stored trace is
		m.Sources = append(m.Sources, bus.StreamSource{URL: s.URL, Title: s.Title, PageAge: s.PageAge})
	}
	return m
}
