package search

import (
	"strconv"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/fetch"
)

// The search messages: defined here, with the worker that serves them; the bus only
// carries them. Their kinds and message ids are stable: they are on the wire.

// Request is one web_search call for one engine (fleet.search.v1.<engine>).
type Request struct {
	JobID  string        `json:"job_id"`
	Hop    int           `json:"hop"`
	CallID string        `json:"call_id"`
	Engine string        `json:"engine"`
	Query  engines.Query `json:"query"`
	// Deadline is when the job stops waiting; a search past it is not run.
	Deadline time.Time `json:"deadline,omitzero"`
	// Direct marks a search of POST /v1/search: its result completes the job itself
	// instead of resuming a chat chain.
	Direct bool `json:"direct,omitempty"`
	// GooglePreferred says the call was narrowed to the Google-backed engines; a
	// fallback from a Google-backed engine then keeps to them.
	GooglePreferred bool `json:"gp,omitempty"`
	// Origin is the engine the call was made for, when Engine is a fallback of it.
	Origin string `json:"origin,omitempty"`
	// Tried are the engines that failed the call before Engine, in order.
	Tried []Attempt `json:"tried,omitempty"`
	// Tenant is the job's tenant: the call rides its lane (bus.SubjectSearchOf).
	Tenant string `json:"tenant,omitempty"`
	// Band is the job's priority band: the call rides its lane, and so does its
	// result (bus.SubjectSearchOf, bus.SubjectResumeOf).
	Band string `json:"band,omitempty"`
}

func (Request) Kind() string { return "search.request.v1" }

// MsgID is the call's key; the n-th hand-off to a fallback engine adds
// ":fallback-n", so each hand-off is published once.
func (m Request) MsgID() string {
	if n := len(m.Tried); n > 0 {
		return bus.CallKey(m.JobID, m.Hop, m.CallID) + ":fallback-" + strconv.Itoa(n)
	}
	return bus.CallKey(m.JobID, m.Hop, m.CallID)
}

// origin is the engine the call was made for.
func (m Request) origin() string {
	if m.Origin != "" {
		return m.Origin
	}
	return m.Engine
}

// Attempt is one engine that failed a call, and how (an engines.ErrorKind).
type Attempt struct {
	Engine string `json:"engine"`
	Reason string `json:"reason"`
}

// Fallback says that a search ran on a fallback engine: the engine the call was made
// for, the engine that gave the result, and the failed attempts before it.
type Fallback struct {
	From   string    `json:"from"`
	Engine string    `json:"engine"`
	Tried  []Attempt `json:"tried"`
}

// Done is a finished search on its way back to its chain
// (fleet.chat.v1.resume). A failed search is a Done too, with
// Result.Citation.Error set: the model is told, the job goes on.
type Done struct {
	JobID  string         `json:"job_id"`
	Hop    int            `json:"hop"`
	CallID string         `json:"call_id"`
	Engine string         `json:"engine"`
	Result engines.Result `json:"result"`
	// Attempts is how many deliveries the search took.
	Attempts int `json:"attempts"`
	// Millis is how long the engine call took.
	Millis int64 `json:"ms"`
	// Worker names the search worker that ran the search.
	Worker string `json:"worker,omitempty"`
	// Fallback is set when engines failed the call and another one ran it; Engine
	// is then the call's engine and Result.Engine the one that answered.
	Fallback *Fallback `json:"fallback,omitempty"`
	// Page is the page of a web_fetch call (Engine is then FetchEngine): Result
	// carries it as one source (or its error), Page the text and what the fetch saw.
	Page *fetch.Page `json:"page,omitempty"`
}

// FetchEngine is the Engine of a web_fetch call's messages and results.
const FetchEngine = "web_fetch"

// FetchRequest is one web_fetch call (fleet.fetch.v1.pages).
type FetchRequest struct {
	JobID  string `json:"job_id"`
	Hop    int    `json:"hop"`
	CallID string `json:"call_id"`
	URL    string `json:"url"`
	// Deadline is when the job stops waiting; a fetch past it is not run.
	Deadline time.Time `json:"deadline,omitzero"`
	// Direct marks a fetch of POST /v1/fetch: its page completes the job itself
	// instead of resuming a chat chain.
	Direct bool `json:"direct,omitempty"`
	// Tenant and Band are the job's: its page resumes the chain on their lane.
	Tenant string `json:"tenant,omitempty"`
	Band   string `json:"band,omitempty"`
}

func (FetchRequest) Kind() string    { return "fetch.request.v1" }
func (m FetchRequest) MsgID() string { return bus.CallKey(m.JobID, m.Hop, m.CallID) }

func (Done) Kind() string    { return "chat.resume.v1" }
func (m Done) MsgID() string { return "done:" + bus.CallKey(m.JobID, m.Hop, m.CallID) }
