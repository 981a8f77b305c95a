package batch

import (
	"time"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// View is the OpenAI batch object: what the API answers and a batch webhook carries.
type View struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"`
	Endpoint         string            `json:"endpoint"`
	Model            string            `json:"model,omitempty"`
	Errors           *ErrorList        `json:"errors"`
	InputFileID      string            `json:"input_file_id"`
	CompletionWindow string            `json:"completion_window"`
	Status           string            `json:"status"`
	OutputFileID     *string           `json:"output_file_id"`
	ErrorFileID      *string           `json:"error_file_id"`
	CreatedAt        int64             `json:"created_at"`
	InProgressAt     *int64            `json:"in_progress_at"`
	ExpiresAt        *int64            `json:"expires_at"`
	FinalizingAt     *int64            `json:"finalizing_at"`
	CompletedAt      *int64            `json:"completed_at"`
	FailedAt         *int64            `json:"failed_at"`
	ExpiredAt        *int64            `json:"expired_at"`
	CancellingAt     *int64            `json:"cancelling_at"`
	CancelledAt      *int64            `json:"cancelled_at"`
	RequestCounts    RequestCounts     `json:"request_counts"`
	Metadata         map[string]string `json:"metadata"`
	// WebhookStatus is the callback delivery's state (an extension: batches with a
	// callback only).
	WebhookStatus string `json:"webhook_status,omitempty"`
	// WebhookSecret is the batch's callback signing secret: in the creation answer
	// only, when the tenant has no secret of its own.
	WebhookSecret string `json:"webhook_secret,omitempty"`
}

// RequestCounts are the batch's progress counters. Cancelled and expired lines are
// counted in neither completed nor failed; they appear in the error file.
type RequestCounts struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
}

// ErrorList is the batch object's errors field.
type ErrorList struct {
	Object string             `json:"object"`
	Data   []state.BatchError `json:"data"`
}

// ViewOf renders a stored batch as the API shows it.
func ViewOf(r *state.Batch) View {
	v := View{ID: r.ID, Object: "batch", Endpoint: r.Endpoint, Model: r.Model, InputFileID: r.InputFileID,
		CompletionWindow: r.Window, Status: r.Status, CreatedAt: r.Created.Unix(),
		InProgressAt: unix(r.InProgressAt), ExpiresAt: unix(r.Expires), FinalizingAt: unix(r.FinalizingAt),
		CompletedAt: unix(r.CompletedAt), FailedAt: unix(r.FailedAt), ExpiredAt: unix(r.ExpiredAt),
		CancellingAt: unix(r.CancellingAt), CancelledAt: unix(r.CancelledAt),
		RequestCounts: RequestCounts{Total: r.Total, Completed: r.Completed, Failed: r.Failed},
		Metadata:      r.Metadata, WebhookStatus: r.Webhook,
	}
	if r.OutputFileID != "" {
		v.OutputFileID = &r.OutputFileID
	}
	if r.ErrorFileID != "" {
		v.ErrorFileID = &r.ErrorFileID
	}
	if len(r.Errors) > 0 {
		v.Errors = &ErrorList{Object: "list", Data: r.Errors}
	}
	return v
}

func unix(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	s := t.Unix()
	return &s
}
