package research

import (
	"time"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// act is what a run's step does next.
type act int

const (
	// actWait: nothing to do now (the run ended, waits for its children or for a
	// plan's approval): ack.
	actWait act = iota
	// actCancel: a client cancelled the run: end it cancelled (the API may have), and
	// cancel its children that still run.
	actCancel
	// actAgent: the run is a provider agent's: submit it, or poll it.
	actAgent
	// actPlan: call the brain for the plan.
	actPlan
	// actReview: the plan waits for the client: status requires_action, webhook.
	actReview
	// actSubmit: submit the round's sub-questions as child jobs.
	actSubmit
	// actReflect: the round's children have ended: ask the brain for gaps.
	actReflect
	// actWrite: call the brain for the report.
	actWrite
	// actVerify: check the draft's citations against the sources.
	actVerify
	// actComplete: end the run with its verified output.
	actComplete
	// actFail: end the run failed (nothing was found, or it cannot go on).
	actFail
	// actStop: the deadline passed or the budget is spent: stop children that run,
	// note why, and go on to write from what there is.
	actStop
	// actLine: the run ended but its batch line's job has not (the step that ended
	// the run died before it ended the job): end the job.
	actLine
	// actNotify: the run ended (or waits for its plan's approval) but its callback's
	// delivery of that is not queued (the step that ended it died before it queued
	// it): queue it.
	actNotify
)

// action is the next action: for actSubmit and actReflect the round, for actFail why.
type action struct {
	act    act
	round  int
	reason string
}

// facts is what decides a run's next action, read from its record.
type facts struct {
	status   string
	cancel   bool
	agent    bool
	overdue  bool
	review   bool // plan: "review"
	planned  bool
	approved bool
	// stopped is why the run stopped spending ("" it did not).
	stopped string
	// rounds are the rounds whose sub-questions are written: submitted, ended,
	// reflected.
	rounds []roundFacts
	// maxRounds is how many rounds after the first the effort allows.
	maxRounds int
	// found counts the children that completed with a finding; running those
	// submitted that have not ended.
	found    int
	running  int
	drafted  bool
	verified bool
	// lineOpen: the run is a batch line's and the line's job has not ended.
	lineOpen bool
	// hookDue: the run's callback is owed a delivery of its status (ended, or
	// requires_action) that was not queued.
	hookDue bool
}

type roundFacts struct {
	submitted int
	ended     int
	reflected bool
}

// next is a run's state machine: from the stored run to what to do. It is pure; every
// row has a test (phase_test.go).
func next(f facts) action {
	last := len(f.rounds) - 1
	switch {
	case f.cancel && (f.running > 0 || !state.RunEnded(f.status)):
		return action{act: actCancel}
	case state.RunEnded(f.status) && f.lineOpen:
		return action{act: actLine}
	case state.RunEnded(f.status) && f.hookDue:
		return action{act: actNotify}
	case state.RunEnded(f.status):
		return action{act: actWait}
	case f.agent && !f.drafted:
		// A provider agent's run is submitted and polled until its result is the
		// draft, which is verified and completed as the fleet's own.
		return action{act: actAgent}
	case f.verified:
		return action{act: actComplete}
	case f.drafted:
		return action{act: actVerify}
	case !f.planned && f.overdue:
		return action{act: actFail, reason: "deadline"}
	case !f.planned && f.stopped != "":
		return action{act: actFail, reason: f.stopped}
	case !f.planned:
		return action{act: actPlan}
	case f.review && !f.approved && f.status == state.RunRequiresAction && f.hookDue:
		return action{act: actNotify}
	case f.review && !f.approved && f.status == state.RunRequiresAction:
		return action{act: actWait}
	case f.review && !f.approved:
		return action{act: actReview}
	case f.stopped == "" && f.overdue:
		return action{act: actStop, reason: "deadline"}
	case f.stopped != "":
		// Nothing more is spent but the writer's call (which the budget may refuse:
		// the report is then composed from the findings as they are). A budget stop
		// waits for the children it paid for; a deadline stop cancelled them.
		if f.stopped == "budget" && last >= 0 && f.rounds[last].ended < f.rounds[last].submitted {
			return action{act: actWait}
		}
		if f.found == 0 {
			return action{act: actFail, reason: f.stopped}
		}
		return action{act: actWrite}
	case last < 0:
		return action{act: actSubmit, round: 0}
	case f.rounds[last].submitted == 0:
		return action{act: actSubmit, round: last}
	case f.rounds[last].ended < f.rounds[last].submitted:
		return action{act: actWait}
	case !f.rounds[last].reflected && last < f.maxRounds:
		return action{act: actReflect, round: last}
	case f.found == 0:
		return action{act: actFail, reason: "no_findings"}
	default:
		return action{act: actWrite}
	}
}

// factsOf reads a run's record into facts.
func factsOf(r *state.Run, req *Request, now time.Time) facts {
	f := facts{status: r.Status, cancel: r.Cancel, agent: r.Agent != "", overdue: !r.Deadline.IsZero() && now.After(r.Deadline),
		review: req.Plan == "review", planned: r.Plan != nil, approved: r.Approved, stopped: r.Incomplete,
		maxRounds: EffortOf(req.Effort).Rounds, drafted: r.Draft != nil, verified: r.Result != nil}
	for _, rd := range r.Rounds {
		f.rounds = append(f.rounds, roundFacts{submitted: rd.Submitted, ended: rd.Ended, reflected: rd.Reflection != nil})
		f.running += max(rd.Submitted, 0)
	}
	f.running = max(f.running-len(r.Ended), 0)
	for id, st := range r.Ended {
		if st == string(state.Completed) && len(r.Findings[id]) > 0 {
			f.found++
		}
	}
	return f
}
