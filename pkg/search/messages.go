package search

import (
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/engines"
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
}

func (Request) Kind() string    { return "search.request.v1" }
func (m Request) MsgID() string { return bus.CallKey(m.JobID, m.Hop, m.CallID) }

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
}

func (Done) Kind() string    { return "chat.resume.v1" }
func (m Done) MsgID() string { return "done:" + bus.CallKey(m.JobID, m.Hop, m.CallID) }
