package bus

import (
	"strconv"
	"unicode/utf8"
)

// A job's live stream. While a job whose client streams runs, the chat worker
// publishes what the client may show before the answer is complete on the job's
// plain-NATS subject SubjectStream(job): the model's text as it arrives, and each
// search as it starts and ends. These messages are ephemeral (core NATS, never stored,
// fire and forget): a message lost costs the client a piece of early display, never
// the answer, because the ingress completes every stream from the job's stored answer
// when the job ends. The durable record stays the EVENTS stream.

// StreamType says what a StreamMsg carries.
type StreamType string

const (
	// StreamDelta is a piece of the model's text on a hop.
	StreamDelta StreamType = "delta"
	// StreamSearchStarted is a web search the hop dispatched (CallID, Engine, Query).
	StreamSearchStarted StreamType = "search_started"
	// StreamSearchDone is a finished search (Sources, or Error).
	StreamSearchDone StreamType = "search_done"
	// StreamSources is the numbered sources a hop's model reads (Sources; its "[n]"
	// markers cite source n), sent before the hop's first delta.
	StreamSources StreamType = "sources"
)

// StreamMsg is one message of a job's live stream.
//
// Deltas are placed, not counted: Offset is the number of characters (Unicode code
// points) of the hop's text that come before Text. Two attempts of one hop (a worker
// died mid-stream and another re-ran the model call) publish overlapping deltas with
// different Attempt values; the ingress keeps the characters of a hop it has already
// relayed and forwards only what extends them, so the client never sees a piece twice.
type StreamMsg struct {
	JobID string     `json:"job_id"`
	Type  StreamType `json:"type"`
	Hop   int        `json:"hop"`
	// Attempt names the model call that wrote a delta (the worker and its call), so the
	// deltas of a re-run hop are told apart from the first attempt's.
	Attempt string `json:"attempt,omitempty"`
	// Offset is the hop text's length in characters before Text (deltas).
	Offset int    `json:"offset"`
	Text   string `json:"text,omitempty"`
	// CallID, Engine and Query name a search (search_started, search_done). Tool is
	// "web_fetch" for a fetch (Query is then its URL), absent for a search.
	Tool   string `json:"tool,omitempty"`
	CallID string `json:"call_id,omitempty"`
	Engine string `json:"engine,omitempty"`
	Query  string `json:"query,omitempty"`
	// Sources are a finished search's pages, in the engine's order (search_done), or
	// the numbered sources of the hop (sources).
	Sources []StreamSource `json:"sources,omitempty"`
	// Error is "TYPE: message" for a search that failed (search_done).
	Error string `json:"error,omitempty"`
}

// StreamSource is one page a search found.
type StreamSource struct {
	URL   string `json:"url"`
	Title string `json:"title,omitempty"`
	// PageAge is the page's date where the engine gave one (search_done).
	PageAge string `json:"page_age,omitempty"`
}

func (StreamMsg) Kind() string { return "job.stream.v1" }

// MsgID identifies the message (it is never stored, so it deduplicates nothing; it is
// what the envelope requires).
func (m StreamMsg) MsgID() string {
	return "st:" + m.JobID + ":" + string(m.Type) + ":" + strconv.Itoa(m.Hop) + ":" + m.Attempt + ":" + strconv.Itoa(m.Offset) + ":" + m.CallID
}

// End is the character offset just past the delta's text.
func (m StreamMsg) End() int { return m.Offset + utf8.RuneCountInString(m.Text) }

// Overlap returns the part of a delta that extends a hop text of have characters
// already relayed: "" when the delta lies wholly inside it (a repeat) or starts
// beyond it (a gap: an earlier delta was lost, and what follows it waits for the
// answer). ok reports whether the delta may be relayed at all.
func (m StreamMsg) Overlap(have int) (suffix string, ok bool) {
	if m.Offset > have {
		return "", false
	}
	skip := have - m.Offset
	s := m.Text
	for ; skip > 0 && s != ""; skip-- {
		_, size := utf8.DecodeRuneInString(s)
		s = s[size:]
	}
	return s, s != ""
}
