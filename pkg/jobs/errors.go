package jobs

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// The ways a job fails, named once. Each is what a synchronous caller gets (HTTP
// status, OpenAI error type and code) and what the job record and its webhook say.
// Messages are written for the client: no internal address, type name or secret.

// DeadlineExceeded: the job did not end within its deadline (the reaper, or a step
// that found the deadline passed).
func DeadlineExceeded() *state.JobError {
	return &state.JobError{Status: http.StatusGatewayTimeout, Type: "timeout", Code: "job_deadline_exceeded",
		Message: "the job did not finish within its deadline"}
}

// ProviderRefused: the model's provider refused the request itself (context too long,
// a bad parameter): the client gets the provider's own status, code and message.
func ProviderRefused(status int, code, msg string) *state.JobError {
	return &state.JobError{Status: status, Type: "invalid_request_error", Code: code, Message: msg}
}

// UpstreamFailed: the model's provider failed (5xx, 429 past the retries, a broken
// connection) on the job's last attempt.
func UpstreamFailed(msg string) *state.JobError {
	return &state.JobError{Status: http.StatusBadGateway, Type: "upstream_error", Message: msg}
}

// ModelTimeout: the model did not answer within the model timeout, on the last attempt.
func ModelTimeout() *state.JobError {
	return &state.JobError{Status: http.StatusGatewayTimeout, Type: "timeout", Message: "the model did not answer in time"}
}

// DeadLettered: a step of the job was dead-lettered after its deliveries ran out.
func DeadLettered(consumer string, deliveries int, reason string) *state.JobError {
	return &state.JobError{Status: http.StatusInternalServerError, Type: "server_error", Code: "dead_letter",
		Message: fmt.Sprintf("the job could not be processed (%s after %d deliveries): %s", consumer, deliveries, reason)}
}

// SearchFailed: a direct search (POST /v1/search) failed. One its tenant's spend
// budget refused (SEARCH_BUDGET_EXHAUSTED) is 429, as the ingress answers new jobs.
func SearchFailed(code, msg string) *state.JobError {
	if code == "SEARCH_BUDGET_EXHAUSTED" {
		return &state.JobError{Status: http.StatusTooManyRequests, Type: "insufficient_quota", Code: "budget_exhausted", Message: msg}
	}
	return &state.JobError{Status: http.StatusBadGateway, Type: "search_error", Code: code, Message: msg}
}

// BatchExpired: the job's batch reached its completion window first.
func BatchExpired() *state.JobError {
	return &state.JobError{Status: http.StatusGatewayTimeout, Type: "timeout", Code: "batch_expired",
		Message: "This request could not be executed before the completion window expired."}
}

// ErrUnknownJob is the reason a message about a job Redis does not know is
// dead-lettered: Redis lost the job (a restart without its data) or the record
// expired. Nothing can be done for the job — its request was in the lost record, and
// the message carries only its id — but nothing is paid for either, and the dead
// letter keeps the message for operators.
var ErrUnknownJob = errors.New("unknown job")

// Orphan is a handler's answer to a message about a job Redis does not know: counted
// (fleet_orphan_messages_total), logged at error level, dead-lettered with its reason.
func Orphan(m *metrics.Metrics, log *slog.Logger, consumer, jobID string) error {
	log.Error("message for a job Redis does not know: dead-lettered, nothing paid", "job", jobID, "consumer", consumer)
	if m != nil {
		m.Orphans.WithLabelValues(consumer).Inc()
	}
	return bus.Permanent(fmt.Errorf("%w %s", ErrUnknownJob, jobID))
}
