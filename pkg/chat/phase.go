package chat

import (
	"fmt"
	"net/http"
	"time"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// phase is where hop h of a job stands, as one step reads it from the store.
type phase int

const (
	// phaseEnded: the job has a terminal status (finished or cancelled): nothing more
	// is paid for.
	phaseEnded phase = iota
	// phaseOverdue: the job is past its deadline.
	phaseOverdue
	// phaseUndispatched: hop h-1 has a result but no recorded calls; only lost state
	// does that.
	phaseUndispatched
	// phaseWaiting: hop h-1 still waits for results; the one that completes it runs
	// hop h.
	phaseWaiting
	// phaseBroken: the stored request cannot be decoded. The phases before it are
	// decided without decoding anything.
	phaseBroken
	// phaseLeased: hop h has no answer and another worker holds its lease (or held it
	// when it died).
	phaseLeased
	// phaseClaimed: hop h has no answer and this worker holds its lease.
	phaseClaimed
	// phaseGarbled: hop h's stored answer cannot be read.
	phaseGarbled
	// phaseAnswered: hop h's answer is final, or hands the client its own tool calls.
	phaseAnswered
	// phaseSearching: hop h's answer asks for web searches.
	phaseSearching
)

// act is what a step does next.
type act int

const (
	// actWait: nothing to do now; ack the message.
	actWait act = iota
	// actRetry: another worker holds the hop; look again after its lease.
	actRetry
	// actCallModel: call the main model for hop h (this worker holds the lease).
	actCallModel
	// actDispatch: record hop h's calls and publish its searches.
	actDispatch
	// actComplete: end the job with hop h's answer.
	actComplete
	// actFail: end the job with an error.
	actFail
	// actReject: the message cannot be acted on (dead-letter it).
	actReject
)

// action is the next action with what it needs: how long to wait (actRetry), why the
// job fails (actFail).
type action struct {
	phase phase
	act   act
	after time.Duration
	err   *state.JobError
}

// facts is the stored view of hop hop of a job that decides its next action, read
// (and decoded) from one LoadStep or RecordAndLoad.
type facts struct {
	hop    int
	status state.Status
	// overdue: the job's deadline has passed.
	overdue bool
	// badRequest is why the stored request cannot be decoded.
	badRequest error
	// prevWant and prevHave are the results hop-1 waits for (-1: not dispatched) and
	// has; unused on hop 0.
	prevWant, prevHave int
	// answered: hop's model answer is stored; garbled: it cannot be read.
	answered, garbled bool
	// claimed: this worker holds hop's lease; else left is what another holder has.
	claimed bool
	left    time.Duration
	// modelKnown: the job's model is one this worker can call.
	modelKnown bool
	model      string
	// server and client count the answer's web_search calls the fleet runs and the
	// calls that are the client's to run.
	server, client int
}

// next is the chain's state machine: from the stored view of a hop to what to do. It
// is pure; every row of its table has a test (phase_test.go).
func next(f facts) action {
	switch {
	case f.status.Terminal():
		return action{phase: phaseEnded, act: actWait}
	case f.overdue:
		return action{phase: phaseOverdue, act: actFail, err: jobs.DeadlineExceeded()}
	case f.hop > 0 && f.prevWant < 0:
		return action{phase: phaseUndispatched, act: actReject}
	case f.hop > 0 && f.prevHave < f.prevWant:
		return action{phase: phaseWaiting, act: actWait}
	case f.badRequest != nil:
		return action{phase: phaseBroken, act: actFail, err: &state.JobError{Status: http.StatusInternalServerError, Type: "server_error", Message: f.badRequest.Error()}}
	case !f.answered && !f.claimed:
		return action{phase: phaseLeased, act: actRetry, after: f.left}
	case !f.answered && !f.modelKnown:
		return action{phase: phaseClaimed, act: actFail, err: &state.JobError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "model_not_found",
			Message: fmt.Sprintf("the model %q does not exist", redact.Clip(f.model, 64))}}
	case !f.answered:
		return action{phase: phaseClaimed, act: actCallModel}
	case f.garbled:
		return action{phase: phaseGarbled, act: actFail, err: &state.JobError{Status: http.StatusBadGateway, Type: "upstream_error", Message: "the model's message is unreadable"}}
	case f.server == 0 || f.client > 0:
		// A final answer, or client tool calls: those are the client's to run (any
		// web_search calls beside them are dropped; the model can ask again).
		return action{phase: phaseAnswered, act: actComplete}
	default:
		return action{phase: phaseSearching, act: actDispatch}
	}
}
