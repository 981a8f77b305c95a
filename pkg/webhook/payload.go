package webhook

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/searchfleet/searchfleet/pkg/jobs"

	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Payload is a delivery's body in the Standard Webhooks structure: the event type,
// when it happened, and what it is about.
type Payload struct {
	// Type is "job.completed", "job.failed", "job.cancelled", "batch.completed", ….
	Type string `json:"type"`
	// Timestamp is when the event happened (RFC 3339, UTC), not when it is delivered.
	Timestamp time.Time `json:"timestamp"`
	// Data is the object the event is about, as the API shows it.
	Data any `json:"data"`
}

// NewPayload encodes a delivery body. The body is fixed when the delivery is enqueued,
// so every attempt sends, and signs, the same bytes.
func NewPayload(eventType string, at time.Time, data any) (json.RawMessage, error) {
	b, err := json.Marshal(Payload{Type: eventType, Timestamp: at.UTC(), Data: data})
	if err != nil {
		return nil, fmt.Errorf("encoding webhook payload %s: %w", eventType, err)
	}
	return b, nil
}

// viewOf is a job as GET /v1/jobs/{id} shows it, less the webhook status (it changes
// after the payload is fixed).
func viewOf(j *state.Job) jobs.View {
	v := jobs.ViewOf(j, openaichat.AnswerJSON) // the chat.completion a Chat client reads
	v.WebhookStatus = ""
	return v
}
