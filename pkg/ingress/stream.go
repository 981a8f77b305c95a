package ingress

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Streaming answers. The ingress subscribes to a streaming job's live subject
// (bus.SubjectStream) before it publishes the job, relays what the chat worker
// publishes there — the model's text as it is written, each search as it starts and
// ends — in the client's protocol at once (wire.Stream.Update), and completes the
// stream from the job's stored answer when the job ends (wire.Stream.Finish), so the
// client's accumulated answer equals the non-streamed one.
//
// Text is relayed by position, never by arrival. Each delta says which hop it belongs
// to, which attempt of the hop's model call wrote it, and its character offset in
// that attempt's text. The ingress follows each attempt's text (a delta that overlaps
// what it has contributes only its new suffix; one that leaves a gap ends that
// attempt's relay) and relays a hop's text only as it grows: an attempt's text is
// relayed when it extends the text already relayed, so when a worker dies mid-hop and
// another re-runs the hop, the second attempt's repeat of what the client has seen is
// dropped and only what goes past it is forwarded. Nothing is ever sent twice. An
// attempt whose text differs from what was relayed (a model that answers differently
// the second time) is not relayed at all; the answer then completes the stream at
// Finish past what the two share. Text of a later hop replaces an earlier hop's as
// the relayed text: only the last hop answers (see README, "Streaming").

// keepAliveEvery is how long a stream may stay silent before a keep-alive is sent.
const keepAliveEvery = 10 * time.Second

// liveAnswer is what the ingress knows of a streaming job's answer before it ends.
type liveAnswer struct {
	hop      int    // the hop whose text is relayed (-1: none yet)
	shown    string // the text relayed for hop
	attempts map[string]*attemptText
	calls    []liveCall
	callAt   map[string]int
	// sources are each hop's numbered sources: its text's "[n]" markers cite them.
	sources map[int][]bus.StreamSource
}

// attemptText is the text of one attempt of a hop's model call, as far as it has
// arrived without a gap.
type attemptText struct {
	b      strings.Builder // appended to only: each String() stays valid, uncopied
	runes  int
	broken bool
}

type liveCall struct {
	hop               int
	id, engine, query string
	tool              string // "web_fetch" for a fetch (query is its URL)
	done              bool
	sources           []bus.StreamSource
	err               string
}

func newLiveAnswer() *liveAnswer {
	return &liveAnswer{hop: -1, attempts: map[string]*attemptText{}, callAt: map[string]int{}, sources: map[int][]bus.StreamSource{}}
}

// add takes one live message in and reports whether the answer grew.
func (l *liveAnswer) add(m bus.StreamMsg) bool {
	switch m.Type {
	case bus.StreamDelta:
		if m.Hop < l.hop {
			return false
		}
		if m.Hop > l.hop {
			l.hop, l.shown, l.attempts = m.Hop, "", map[string]*attemptText{}
		}
		a := l.attempts[m.Attempt]
		if a == nil {
			a = &attemptText{}
			l.attempts[m.Attempt] = a
		}
		if a.broken {
			return false
		}
		if m.Offset > a.runes {
			a.broken = true // a delta of this attempt was lost: the answer fills the gap
			return false
		}
		suffix, ok := m.Overlap(a.runes)
		if !ok {
			return false
		}
		a.b.WriteString(suffix)
		a.runes = m.End()
		if text := a.b.String(); len(text) > len(l.shown) && strings.HasPrefix(text, l.shown) {
			l.shown = text
			return true
		}
		return false
	case bus.StreamSources:
		if _, ok := l.sources[m.Hop]; ok {
			return false
		}
		l.sources[m.Hop] = m.Sources
		return m.Hop == l.hop
	case bus.StreamSearchStarted, bus.StreamSearchDone:
		key := strconv.Itoa(m.Hop) + ":" + m.CallID
		i, ok := l.callAt[key]
		if !ok {
			i = len(l.calls)
			l.callAt[key] = i
			l.calls = append(l.calls, liveCall{hop: m.Hop, id: m.CallID, engine: m.Engine, query: m.Query, tool: m.Tool})
		}
		c := &l.calls[i]
		if m.Type == bus.StreamSearchStarted || c.done {
			return !ok
		}
		c.done, c.sources, c.err = true, m.Sources, m.Error
		return true
	}
	return false
}

// answer is the answer as far as it is known, in the form wire.Stream.Update reads:
// a server call per search (with its result once done), then the relayed text once
// every search so far is done.
func (l *liveAnswer) answer(base *wire.Response) *wire.Response {
	r := *base
	r.Content, r.Sources = nil, nil
	entries := make([]wire.TraceEntry, 0, len(l.calls))
	pending := false
	for _, c := range l.calls {
		e := wire.TraceEntry{Hop: c.hop, CallID: c.id, Engine: c.engine, Query: c.query, Sources: []wire.TraceSource{}, Error: c.err}
		if c.tool != "" {
			e.Tool, e.URL, e.Query = c.tool, c.query, ""
		}
		for _, s := range c.sources {
			e.Sources = append(e.Sources, wire.TraceSource{URL: s.URL, Title: s.Title, PageAge: s.PageAge})
			r.Sources = append(r.Sources, wire.Source{URL: s.URL, Title: s.Title})
		}
		entries = append(entries, e)
		pending = pending || !c.done
	}
	if l.shown != "" && !pending {
		// The text's markers cite the hop's sources, as the answer's annotations will.
		p := wire.Part{Kind: wire.PartText, Text: l.shown}
		srcs := l.sources[l.hop]
		for _, m := range llm.CitationMarkers(l.shown, len(srcs)) {
			src := srcs[m.N-1]
			p.Citations = append(p.Citations, wire.Citation{URL: src.URL, Title: src.Title, Start: m.Start, End: m.End})
		}
		r.Content = []wire.Part{p}
	}
	if len(entries) > 0 {
		b, _ := json.Marshal(entries)
		if r.AddTrace(b) != nil {
			return &r
		}
		// AddTrace puts a call and its result per search: a search still running has
		// no result yet.
		parts := r.Content[:0:0]
		for i, p := range r.Content {
			if p.Kind == wire.PartServerResult && i/2 < len(l.calls) && !l.calls[i/2].done {
				continue
			}
			parts = append(parts, p)
		}
		r.Content = parts
	}
	return &r
}

// watchLive is watch for a streaming answer: the job's live subject joins its events
// in the same channel. The connection's reader puts each live message in the channel
// as it arrives, and an event arrives after it through the events subscription, so
// what the worker published before the job's terminal event is there before it.
func (s *Server) watchLive(jobID string) (*waiter, error) {
	wt, err := s.watchWith(jobID, 4096)
	if err != nil {
		return nil, err
	}
	live, err := s.Bus.ChanSubscribe(bus.SubjectStream(jobID), wt.ch)
	if err != nil {
		wt.stop()
		return nil, err
	}
	wt.live = live
	return wt, nil
}

// streamHold is how long a stream's 200 may wait for the job's first sign of life
// (text, a search, its end): a job that fails before (a provider refusing the first
// model call) is answered with an HTTP error in the client's protocol instead of a 200
// and an error event.
const streamHold = 3 * time.Second

// errorEncoder is a wire.Stream that can render its protocol's error body.
type errorEncoder interface{ EncodeError(*wire.Error) []byte }

// relayStream answers a streaming request: the opening events once the job shows
// life (or after streamHold), then the answer as it grows, keep-alives whenever
// nothing was sent for keepAliveEvery, and the rest of the answer (or the failure)
// when the job ends. shown trims the answer as it grows to what the client may see
// (answer's result is trimmed already). A client that goes away leaves the job
// running: it can be fetched later.
func (s *Server) relayStream(w http.ResponseWriter, r *http.Request, st wire.Stream, base *wire.Response, wt *waiter, answer func(*state.Job) (*wire.Response, *wire.Error), shown func(*wire.Response)) {
	ctx, cancel := s.stream(w, r)
	defer cancel()
	rc := http.NewResponseController(w)
	held := time.Now()
	started := false
	last := time.Now()
	send := func(evs []wire.Event) {
		if len(evs) == 0 {
			return
		}
		wire.WriteSSE(w, evs)
		rc.Flush()
		last = time.Now()
	}
	// open sends the 200 and the opening events, once; every other event follows it.
	open := func() {
		if started {
			return
		}
		started = true
		startSSE(w)
		send(st.Start(base))
		rc.Flush()
	}
	fail := func(e *wire.Error) {
		if enc, ok := st.(errorEncoder); ok && !started {
			writeWireError(w, enc, e)
			return
		}
		open()
		send(st.Fail(base, e))
	}
	if _, ok := st.(errorEncoder); !ok {
		open() // a stream that cannot answer with an HTTP error opens at once
	}
	la := newLiveAnswer()
	wt.on = func(m *nats.Msg) {
		msg, _, err := bus.Decode[bus.StreamMsg](m.Data)
		if err == nil && la.add(msg) {
			open()
			live := la.answer(base)
			shown(live)
			send(st.Update(live))
		}
	}
	done, err := wt.wait(ctx, s, base.JobID, s.SyncWait, func() {
		switch {
		case !started && time.Since(held) >= streamHold:
			open()
		case started && time.Since(last) >= keepAliveEvery:
			send(st.KeepAlive())
		}
	})
	switch {
	case err != nil:
		if e := s.waitError(base.JobID, err); e != nil {
			fail(e)
		}
	default:
		resp, e := answer(done)
		if e != nil {
			fail(e)
		} else {
			open()
			send(st.Finish(resp))
		}
	}
}

// startSSE sends the 200 of a server-sent event stream, with its headers, and returns
// the controller that flushes it.
func startSSE(w http.ResponseWriter) *http.ResponseController {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return http.NewResponseController(w)
}

// streamLive reports whether a message is one of a job's live stream (not an event).
func streamLive(m *nats.Msg) bool {
	return m.Header.Get(bus.HeaderKind) == bus.StreamMsg{}.Kind()
}
