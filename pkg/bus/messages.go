package bus

import (
	"encoding/json"
	"strconv"
	"time"
)

// The fleet's message kinds. Each is a value type with a stable, versioned kind and a
// message id derived from what it is about, never from when it was sent, so the same
// step published twice is one message.

// ChatJob asks a chat worker to start a job (fleet.jobs.v1.chat or .batch). The
// request itself is in Redis with the job: messages stay small and a redelivered job
// reads the same request.
type ChatJob struct {
	JobID  string `json:"job_id"`
	Tenant string `json:"tenant,omitempty"`
}

func (ChatJob) Kind() string    { return "chat.job.v1" }
func (m ChatJob) MsgID() string { return "job:" + m.JobID }

// ResearchStep asks a chat worker to take a research run's next step
// (fleet.jobs.v1.research). Why names what prompted it (the run's start, a child's
// end, an approval, a cancel): one message per cause, so a cause published twice is
// one message, and the step reads the run, not the message, for what to do.
type ResearchStep struct {
	RunID string `json:"run_id"`
	Why   string `json:"why"`
}

func (ResearchStep) Kind() string    { return "research.step.v1" }
func (m ResearchStep) MsgID() string { return "rs:" + m.RunID + ":" + m.Why }

// CallKey identifies one server-tool call of a job: job:hop:call.
func CallKey(jobID string, hop int, callID string) string {
	return jobID + ":" + strconv.Itoa(hop) + ":" + callID
}

// EventType names a job lifecycle event.
type EventType string

// The lifecycle events, in the order a job with one search meets them:
// queued → model_call → search_requested → search_done → model_call → completed.
const (
	EventQueued          EventType = "queued"
	EventModelCall       EventType = "model_call"
	EventSearchRequested EventType = "search_requested"
	EventSearchDone      EventType = "search_done"
	EventCompleted       EventType = "completed"
	EventFailed          EventType = "failed"
	EventCancelled       EventType = "cancelled"
	EventWebhookFailed   EventType = "webhook_failed"
	EventWebhookSent     EventType = "webhook_delivered"
)

// Terminal reports whether a job ends with this event.
func (t EventType) Terminal() bool {
	return t == EventCompleted || t == EventFailed || t == EventCancelled
}

// Event is one lifecycle event of a job (fleet.events.v1.<job>).
type Event struct {
	JobID string    `json:"job_id"`
	Type  EventType `json:"type"`
	At    time.Time `json:"at"`
	Hop   int       `json:"hop"`
	// CallID, Engine and Query describe the search of search_requested/search_done.
	CallID string `json:"call_id,omitempty"`
	Engine string `json:"engine,omitempty"`
	Query  string `json:"query,omitempty"`
	// Sources counts the sources a search returned.
	Sources int `json:"sources,omitempty"`
	// Error explains failed, and a failed search of search_done.
	Error string `json:"error,omitempty"`
	// Failure is a failed job's whole error (the job record's error object), so the
	// terminal event alone can restore how a job ended.
	Failure json.RawMessage `json:"failure,omitempty"`
	// Job is a terminal event's copy of the ended job's record (a state.Job in JSON,
	// less its request), on a job with a callback only: the finisher runs the job's
	// finish hooks from it when Redis no longer knows the job. It holds what the record
	// holds (the callback's URL and events, never a signing secret) and is for the
	// finisher alone: a job's event stream to its client leaves it out. jobs.End
	// bounds it (jobs.MaxEventJob).
	Job json.RawMessage `json:"job,omitempty"`
}

func (Event) Kind() string { return "job.event.v1" }
func (m Event) MsgID() string {
	if m.Type.Terminal() {
		return "ev:" + m.JobID + ":end" // one terminal event per job: see SubjectJobEnd
	}
	return "ev:" + m.JobID + ":" + string(m.Type) + ":" + strconv.Itoa(m.Hop) + ":" + m.CallID
}

// WebhookDelivery is one callback delivery (fleet.webhooks.v1.deliver). ID is the
// Standard Webhooks webhook-id: the same for every attempt of this delivery.
type WebhookDelivery struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant,omitempty"`
	// JobID or BatchID names what the delivery is about; the signing secret is the
	// tenant's, or the one created for that job or batch.
	JobID   string `json:"job_id,omitempty"`
	BatchID string `json:"batch_id,omitempty"`
	// Event is the event type ("job.completed", "batch.completed", …).
	Event string `json:"event"`
	URL   string `json:"url"`
	// Payload is the body to deliver, fixed when the delivery is enqueued.
	Payload json.RawMessage `json:"payload"`
	// Created is when the event happened.
	Created time.Time `json:"created"`
}

func (WebhookDelivery) Kind() string    { return "webhook.delivery.v1" }
func (m WebhookDelivery) MsgID() string { return "wh:" + m.ID }

// BatchExpand asks for a batch to be turned into jobs (fleet.jobs.v1.expand). Expansion
// is resumable: job ids derive from the batch id and line, so a redelivered expansion
// creates each job once.
type BatchExpand struct {
	BatchID string `json:"batch_id"`
	Tenant  string `json:"tenant,omitempty"`
}

func (BatchExpand) Kind() string    { return "batch.expand.v1" }
func (m BatchExpand) MsgID() string { return "expand:" + m.BatchID }
