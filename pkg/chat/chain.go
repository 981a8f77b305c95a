package chat

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/fetch"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/search"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// turn is what the chain stores for one hop's model call (state field m:<hop>): the
// model's answer in canonical form (wire.Turn: its parts, reasoning state included,
// as the next hop sends them back) and how the hop was offered.
type turn struct {
	wire.Turn
	// Offered says whether web_search was offered on this hop: only then are the
	// model's web_search calls the fleet's to run.
	Offered bool `json:"offered"`
	// GooglePreferred is the engine narrowing in force on this hop.
	GooglePreferred bool `json:"gp,omitempty"`
	// Fetch says whether web_fetch was offered on this hop (only then are the model's
	// web_fetch calls the fleet's to run).
	Fetch bool `json:"fetch,omitempty"`
}

// call is one server-tool call of a hop (state field calls:<hop>).
type call struct {
	ID string `json:"id"`
	// Tool is the server tool called (serverTools): "" is web_search, as in every
	// chain stored before web_fetch.
	Tool   string `json:"tool,omitempty"`
	URL    string `json:"url,omitempty"` // web_fetch's page
	Engine string `json:"engine,omitempty"`
	// Choice says how the engine was chosen (intent.Call.Choice).
	Choice string        `json:"choice,omitempty"`
	Query  engines.Query `json:"query"`
	// Local is set when the call was answered without a search (rejected arguments,
	// the search limit): Result is recorded at dispatch, so a replayed dispatch
	// records the same result.
	Local  bool            `json:"local,omitempty"`
	Result *engines.Result `json:"result,omitempty"`
	// Recorded says a local call was answered from recorded results (replay.go):
	// "replay" (the replayed job's) or "dedupe" (this job's or its batch's).
	Recorded string `json:"recorded,omitempty"`
	// Page is the page of a web_fetch answered from a record: the local result's
	// Done carries it, as a fetch worker's does, for rendering and the trace.
	Page *fetch.Page `json:"page,omitempty"`
	// Salt, on a hop's first call, is the hop's random evidence-delimiter salt
	// (evidenceNonce): drawn once, when the calls are first recorded.
	Salt string `json:"salt,omitempty"`
}

// view is a decoded chain: the stored turns, calls and results by hop.
type view struct {
	job *state.Job
	// req is the job's request in canonical form (wire.DecodeStored), protocol the
	// protocol its client spoke, toolNames the names of its client tools.
	req       *wire.Request
	protocol  wire.Protocol
	toolNames []string
	chain     *state.Chain
	// decoded memoizes results: a completion reads each several times (messages,
	// sources, trace, response) and decoding them dominated a step's CPU.
	decoded map[string]*search.Done
	// rendered memoizes history(h); turns memoizes decoded turns, calls each hop's
	// decoded calls (a completion reads them for the evidence nonce, the fetch count,
	// the trace and the response).
	rendered map[int]renderedHop
	turns    map[int]*turn
	hopCalls map[int][]call
	// evidenceKey keys the job's evidence delimiter (Worker.EvidenceKey).
	evidenceKey []byte
	// unsaved is a hop's model answer in chain but not stored yet: its dispatch
	// stores it with its calls, the completion with the ending (step.answered).
	unsaved *unsavedTurn
}

// unsavedTurn is hop's model answer b, not stored yet.
type unsavedTurn struct {
	hop int
	b   []byte
}

type renderedHop struct {
	msgs []wire.Message
	srcs *sources
}

func newView(job *state.Job, chain *state.Chain) (*view, error) {
	st, err := wire.DecodeStored(job.Request)
	if err != nil {
		return nil, fmt.Errorf("stored request unreadable: %w", err)
	}
	return &view{job: job, req: st.Request, protocol: st.Protocol, toolNames: st.Request.ToolNames(), chain: chain,
		decoded: map[string]*search.Done{}, rendered: map[int]renderedHop{}, turns: map[int]*turn{}, hopCalls: map[int][]call{}}, nil
}

func (v *view) turn(h int) (*turn, bool) {
	if t, ok := v.turns[h]; ok {
		return t, true
	}
	hp, ok := v.chain.Hops[h]
	if !ok || hp.Turn == nil {
		return nil, false
	}
	var t turn
	if json.Unmarshal(hp.Turn, &t) != nil {
		return nil, false
	}
	v.turns[h] = &t
	return &t, true
}

// seed records a result already decoded (the resume message being handled).
func (v *view) seed(d *search.Done) {
	v.decoded[strconv.Itoa(d.Hop)+":"+d.CallID] = d
}

// calls returns hop h's recorded calls, decoded once per view: callers read them and
// never write them.
func (v *view) calls(h int) []call {
	if cs, ok := v.hopCalls[h]; ok {
		return cs
	}
	hp, ok := v.chain.Hops[h]
	if !ok || hp.Calls == nil {
		return nil
	}
	var cs []call
	_ = json.Unmarshal(hp.Calls, &cs)
	if v.hopCalls != nil {
		v.hopCalls[h] = cs
	}
	return cs
}

// done returns the recorded outcome of call id of hop h.
func (v *view) done(h int, id string) (*search.Done, bool) {
	key := strconv.Itoa(h) + ":" + id
	if d, ok := v.decoded[key]; ok {
		return d, d != nil
	}
	hp, ok := v.chain.Hops[h]
	if !ok {
		return nil, false
	}
	raw, ok := hp.Results[id]
	if !ok {
		return nil, false
	}
	d, _, err := bus.Decode[search.Done](raw)
	if err != nil {
		v.decoded[key] = nil
		return nil, false
	}
	v.decoded[key] = &d
	return &d, true
}

// sources numbers every source of the chain's results in one sequence, in hop and call
// order, merging repeats by URL: the [n] the model cites in its final answer index it.
type sources struct {
	list  []engines.Source
	index map[string]int
}

func (s *sources) add(src engines.Source) int {
	if s.index == nil {
		s.index = map[string]int{}
	}
	if n, ok := s.index[src.Web.URI]; ok {
		return n
	}
	s.list = append(s.list, src)
	s.index[src.Web.URI] = len(s.list)
	return len(s.list)
}

// history builds what the chain adds to the client's conversation before hop h: each
// earlier hop's answer as the model gave it (its reasoning state included) and its
// tool results, rendered with the chain-wide source numbering. It is derived from
// stored state only, so every worker (and every redelivery) builds the same messages.
func (v *view) history(h int) ([]wire.Message, *sources) {
	if r, ok := v.rendered[h]; ok {
		return r.msgs, r.srcs
	}
	var msgs []wire.Message
	srcs := &sources{}
	for k := 0; k < h; k++ {
		t, ok := v.turn(k)
		if !ok {
			break
		}
		msgs = append(msgs, wire.Message{Role: wire.RoleAssistant, Parts: t.Parts})
		for _, tc := range t.Calls() {
			d, ok := v.done(k, tc.ID)
			if !ok {
				continue // a client tool call never reaches a later hop
			}
			content := evidence(v.nonce(k), renderDone(d, srcs))
			msgs = append(msgs, wire.Message{Role: wire.RoleTool, Parts: []wire.Part{{Kind: wire.PartToolResult,
				Result: &wire.ToolResult{CallID: tc.ID, Parts: []wire.Part{{Kind: wire.PartText, Text: content}}}}}})
		}
	}
	v.rendered[h] = renderedHop{msgs: msgs, srcs: srcs}
	return msgs, srcs
}

// allSources numbers the sources of every hop up to and including h. The final hop
// has no results of its own, so its sources are those its messages were built with.
func (v *view) allSources(h int) *sources {
	if hp, ok := v.chain.Hops[h]; !ok || len(hp.Results) == 0 {
		_, srcs := v.history(h)
		return srcs
	}
	_, srcs := v.history(h + 1)
	return srcs
}

// render is the tool-result text the model reads for one result, with its sources
// renumbered into the chain's sequence.
func render(res *engines.Result, srcs *sources) string {
	if res.Citation.Error != nil {
		return res.Citation.LLMContent
	}
	local := make([]int, len(res.Citation.Sources)+1)
	for i, s := range res.Citation.Sources {
		local[i+1] = srcs.add(s)
	}
	number := func(n int) int {
		if n >= 1 && n < len(local) {
			return local[n]
		}
		return 0
	}
	summary := engines.RenumberMarkers(res.Summary, number)
	return engines.BuildLLMContent(res.Query, summary, res.Citation.Sources, res.Hits, number)
}

// trace is one server-tool call of a job (a search or a fetch), for the job record.
type traceEntry struct {
	Hop    int    `json:"hop"`
	CallID string `json:"call_id"`
	// Tool is "web_fetch" for a fetch (absent: a search).
	Tool string `json:"tool,omitempty"`
	// URL, Status, Bytes, Truncated and Kind say what a fetch asked for and saw.
	URL       string `json:"url,omitempty"`
	Status    int    `json:"status,omitempty"`
	Bytes     int64  `json:"bytes,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	Kind      string `json:"kind,omitempty"`
	// Excerpt is the beginning of a fetched page's text (the Anthropic answer's
	// document block shows it).
	Excerpt string `json:"excerpt,omitempty"`
	// RetrievedAt is when the page was read (RFC 3339).
	RetrievedAt string `json:"retrieved_at,omitempty"`
	Engine      string `json:"engine,omitempty"`
	// EngineChoice says how the engine was chosen: "model", "default",
	// "language:zh", or "request" (the request's own search settings named it).
	EngineChoice string `json:"engine_choice,omitempty"`
	Query        string `json:"query"`
	// Sources are the search's numbered sources with their titles and dates, the
	// form wire.TraceEntry reads (and older string-only traces still decode into).
	Sources []wire.TraceSource `json:"sources"`
	Error   string             `json:"error,omitempty"`
	Warn    []string           `json:"warnings,omitempty"`
	Usage   any                `json:"usage,omitempty"`
	// Worker, Attempts and Millis say who ran the search, in how many deliveries, how fast.
	Worker   string `json:"worker,omitempty"`
	Attempts int    `json:"attempts,omitempty"`
	Millis   int64  `json:"ms,omitempty"`
	// Fallback names the engines that failed the call and the one that answered it.
	Fallback *search.Fallback `json:"fallback,omitempty"`
	// Result is the content address (search.Address) of the recorded result.
	Result string `json:"result,omitempty"`
}

func (v *view) trace(last int) ([]traceEntry, engines.Usage) {
	var out []traceEntry
	var total engines.Usage
	for h := 0; h <= last; h++ {
		cs := v.calls(h)
		for _, c := range cs {
			e := traceEntry{Hop: h, CallID: c.ID, Engine: c.Engine, EngineChoice: c.Choice, Query: c.Query.Query, Sources: []wire.TraceSource{}}
			if c.Tool != "" {
				e.Tool, e.URL, e.Query = c.Tool, c.URL, ""
			}
			if d, ok := v.done(h, c.ID); ok {
				res := &d.Result
				e.Worker, e.Attempts, e.Millis = d.Worker, d.Attempts, d.Millis
				e.Fallback = d.Fallback
				e.Sources = traceSources(res)
				if res.Citation.Error != nil {
					e.Error = res.Citation.Error.Type + ": " + res.Citation.Error.Message
				}
				e.Warn = res.Warnings
				if !c.Local {
					total.Add(res.Usage)
					e.Usage = res.Usage
				}
				traceRecord(&e, c, res)
				tracePage(&e, d)
			}
			out = append(out, e)
		}
	}
	return out, total
}

// traceSources lists a result's numbered sources for the trace: URL, title (the
// source's, else its hit's) and, where the engine dated the page, its date.
func traceSources(res *engines.Result) []wire.TraceSource {
	hits := make(map[string]*engines.Hit, len(res.Hits))
	for i := range res.Hits {
		if _, dup := hits[res.Hits[i].URL]; !dup {
			hits[res.Hits[i].URL] = &res.Hits[i]
		}
	}
	out := make([]wire.TraceSource, 0, len(res.Citation.Sources))
	for _, s := range res.Citation.Sources {
		ts := wire.TraceSource{URL: s.Web.URI, Title: s.Web.Title}
		if h := hits[s.Web.URI]; h != nil {
			if ts.Title == "" {
				ts.Title = h.Title
			}
			if !h.Published.IsZero() {
				ts.PageAge = h.Published.UTC().Format("January 2, 2006")
			}
		}
		out = append(out, ts)
	}
	return out
}
