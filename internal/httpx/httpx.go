// Package httpx holds what every HTTP handler of the API shares: the OpenAI error
// shape, JSON answers, and the tenant a request was authenticated as.
package httpx

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// Error is the OpenAI error body: {"error": {...}}.
type Error struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is the inside of an OpenAI error.
type ErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// WriteError answers with an OpenAI-shaped error.
func WriteError(w http.ResponseWriter, status int, typ, code, param, msg string) {
	b := ErrorBody{Message: msg, Type: typ}
	if param != "" {
		b.Param = &param
	}
	if code != "" {
		b.Code = &code
	}
	WriteJSON(w, status, Error{Error: b})
}

// WriteJSON answers with v as JSON (a json.RawMessage is written as is).
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if raw, ok := v.(json.RawMessage); ok {
		w.Write(raw)
		return
	}
	json.NewEncoder(w).Encode(v)
}

type tenantKey struct{}

// WithTenant returns ctx carrying the authenticated tenant.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// Tenant returns the request's tenant ("default" on an open API).
func Tenant(r *http.Request) string {
	if t, ok := r.Context().Value(tenantKey{}).(string); ok {
		return t
	}
	return "default"
}

// JobView is a job as the API shows it: GET /v1/jobs/{id}, the 202 of POST /v1/jobs,
// and the data of a job webhook.
type JobView struct {
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
}

// ViewOf renders a job record for clients.
func ViewOf(j *state.Job) JobView {
	v := JobView{ID: j.ID, Object: "job", Kind: j.Kind, Status: j.Status, Model: j.Model, CreatedAt: j.Created.Unix(), UpdatedAt: j.Updated.Unix(),
		Response: j.Response, Usage: j.Usage, Trace: j.Trace, WebhookStatus: j.WebhookStatus, Batch: j.Batch}
	if !j.Finished.IsZero() {
		t := j.Finished.Unix()
		v.FinishedAt = &t
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
