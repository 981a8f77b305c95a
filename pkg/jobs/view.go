package jobs

import (
	"encoding/json"

	"github.com/searchfleet/searchfleet/pkg/state"
	"github.com/searchfleet/searchfleet/pkg/trace"
)

// View is a job as clients see it: GET /v1/jobs/{id}, the 202 of POST /v1/jobs, and
// the data of a job webhook.
type View struct {
	ID            string          `json:"id"`
	Object        string          `json:"object"`
	Kind          string          `json:"kind"`
	Status        state.Status    `json:"status"`
	Model         string          `json:"model,omitempty"`
	CreatedAt     int64           `json:"created_at"`
	UpdatedAt     int64           `json:"updated_at"`
	FinishedAt    *int64          `json:"finished_at"`
	Response      json.RawMessage `json:"response"`
	Error         *ErrorBody      `json:"error"`
	Usage         json.RawMessage `json:"usage,omitempty"`
	Trace         json.RawMessage `json:"trace,omitempty"`
	WebhookStatus string          `json:"webhook_status,omitempty"`
	// WebhookSecret is the job's callback signing secret: in the 202 answer only.
	WebhookSecret string `json:"webhook_secret,omitempty"`
	Batch         string `json:"batch_id,omitempty"`
	// ReplayOf is the job this one replays (POST /v1/jobs/{id}/replay).
	ReplayOf string `json:"replay_of,omitempty"`
	// TraceID is the job's OpenTelemetry trace; TraceURL its page in the trace UI
	// the operator configured (FLEET_TRACE_UI_URL).
	TraceID  string `json:"trace_id,omitempty"`
	TraceURL string `json:"trace_url,omitempty"`
}

// ErrorBody is an error in the OpenAI shape (the inside of {"error": {...}}): how a
// job's error is shown, and the body of the API's error answers.
type ErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// ViewOf renders a job record for clients. answer turns the stored answer into the
// form a client reads (the ingress and the webhook deliveries give the Chat
// completion's renderer); when it fails, the stored answer is shown as it is.
func ViewOf(j *state.Job, answer func(stored json.RawMessage) (json.RawMessage, error)) View {
	v := View{ID: j.ID, Object: "job", Kind: j.Kind, Status: j.Status, Model: j.Model, CreatedAt: j.Created.Unix(), UpdatedAt: j.Updated.Unix(),
		Response: j.Response, Usage: j.Usage, Trace: j.Trace, WebhookStatus: j.WebhookStatus, Batch: j.Batch, ReplayOf: j.ReplayOf,
		TraceID: j.TraceID, TraceURL: trace.Link(j.TraceID)}
	if !j.Finished.IsZero() {
		t := j.Finished.Unix()
		v.FinishedAt = &t
	}
	if r, err := answer(j.Response); err == nil {
		v.Response = r
	}
	if v.Response == nil {
		v.Response = json.RawMessage("null")
	}
	if j.Error != nil {
		v.Error = &ErrorBody{Message: j.Error.Message, Type: j.Error.Type}
		if code := j.Error.Code; code != "" {
			v.Error.Code = &code
		}
	}
	return v
}
