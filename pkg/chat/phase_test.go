package chat

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// TestNext is the chain's transition table: every phase a hop can be read in, the
// action it leads to, and the redeliveries and crash points that land in each.
func TestNext(t *testing.T) {
	t.Parallel()
	// A running job at hop 0 whose lease this worker holds and whose model exists.
	base := facts{hop: 0, status: state.Running, claimed: true, modelKnown: true, model: "m", prevWant: -1}
	with := func(f func(*facts)) facts { x := base; f(&x); return x }
	cases := []struct {
		name    string
		f       facts
		phase   phase
		act     act
		after   time.Duration
		errCode int // the failure's HTTP status (actFail)
	}{
		// New job: the first delivery holds the lease and calls the model.
		{"new job calls the model", base, phaseClaimed, actCallModel, 0, 0},
		{"queued job calls the model", with(func(f *facts) { f.status = state.Queued }), phaseClaimed, actCallModel, 0, 0},

		// Ended jobs: whatever else is stored, nothing more is paid for.
		{"completed job", with(func(f *facts) { f.status = state.Completed; f.overdue = true }), phaseEnded, actWait, 0, 0},
		{"failed job", with(func(f *facts) { f.status = state.Failed }), phaseEnded, actWait, 0, 0},
		{"cancelled job", with(func(f *facts) { f.status = state.Cancelled; f.answered, f.server = true, 2 }), phaseEnded, actWait, 0, 0},
		{"cancelled job's late result", with(func(f *facts) { f.status = state.Cancelled; f.hop, f.prevWant = 1, -1 }), phaseEnded, actWait, 0, 0},

		// Failures that end the job visibly.
		{"past the deadline", with(func(f *facts) { f.overdue = true; f.answered = true }), phaseOverdue, actFail, 0, http.StatusGatewayTimeout},
		{"unreadable request", with(func(f *facts) { f.badRequest = errors.New("stored request unreadable") }), phaseBroken, actFail, 0, http.StatusInternalServerError},
		{"unknown model", with(func(f *facts) { f.modelKnown = false }), phaseClaimed, actFail, 0, http.StatusNotFound},
		{"garbled answer", with(func(f *facts) { f.answered, f.garbled = true, true }), phaseGarbled, actFail, 0, http.StatusBadGateway},

		// Resume: results of hop 0 arriving for hop 1.
		{"result for an undispatched hop", with(func(f *facts) { f.hop, f.prevWant, f.prevHave = 1, -1, 1 }), phaseUndispatched, actReject, 0, 0},
		{"first of two results waits", with(func(f *facts) { f.hop, f.prevWant, f.prevHave = 1, 2, 1; f.claimed = false }), phaseWaiting, actWait, 0, 0},
		{"a waiting hop decodes nothing, even a broken request", with(func(f *facts) { f.hop, f.prevWant, f.prevHave = 1, 2, 1; f.badRequest = errors.New("x") }), phaseWaiting, actWait, 0, 0},
		{"completing result calls the model", with(func(f *facts) { f.hop, f.prevWant, f.prevHave = 1, 2, 2 }), phaseClaimed, actCallModel, 0, 0},
		{"all results local (0 expected, 0 had) calls the model", with(func(f *facts) { f.hop, f.prevWant, f.prevHave = 1, 0, 0 }), phaseClaimed, actCallModel, 0, 0},
		{"hop 0 ignores the previous hop", with(func(f *facts) { f.prevWant, f.prevHave = 3, 0 }), phaseClaimed, actCallModel, 0, 0},
		{"replayed completing result, the next hop held", with(func(f *facts) { f.hop, f.prevWant, f.prevHave = 1, 1, 1; f.claimed, f.left = false, 2*time.Second }), phaseLeased, actRetry, 2 * time.Second, 0},

		// Leases: another worker runs the hop, or died in its model call
		// (crash point chat.after_model_call): look again after its lease.
		{"another worker calls the model", with(func(f *facts) { f.claimed, f.left = false, 1500*time.Millisecond }), phaseLeased, actRetry, 1500 * time.Millisecond, 0},
		{"lease held, model unknown: wait for the holder", with(func(f *facts) { f.claimed, f.left, f.modelKnown = false, time.Second, false }), phaseLeased, actRetry, time.Second, 0},
		{"dead holder's lease lapsed: call the model again", base, phaseClaimed, actCallModel, 0, 0},

		// A stored answer needs no lease: a redelivery after chat.after_turn_stored or
		// chat.after_dispatch goes on from it, whoever holds the lease.
		{"final answer completes", with(func(f *facts) { f.answered = true }), phaseAnswered, actComplete, 0, 0},
		{"final answer completes without the lease", with(func(f *facts) { f.answered, f.claimed, f.left = true, false, time.Second }), phaseAnswered, actComplete, 0, 0},
		{"client tool calls complete", with(func(f *facts) { f.answered, f.client = true, 1 }), phaseAnswered, actComplete, 0, 0},
		{"web searches beside client calls complete", with(func(f *facts) { f.answered, f.server, f.client = true, 2, 1 }), phaseAnswered, actComplete, 0, 0},
		{"web searches dispatch", with(func(f *facts) { f.answered, f.server = true, 2 }), phaseSearching, actDispatch, 0, 0},
		{"replayed dispatch (crash after the turn was stored)", with(func(f *facts) { f.answered, f.server, f.claimed = true, 1, false }), phaseSearching, actDispatch, 0, 0},
		{"hop 2 answered after its results", with(func(f *facts) { f.hop, f.prevWant, f.prevHave, f.answered = 2, 1, 1, true }), phaseAnswered, actComplete, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := next(c.f)
			if a.phase != c.phase || a.act != c.act || a.after != c.after {
				t.Fatalf("next = %s/%s after %s, want %s/%s after %s", a.phase, a.act, a.after, c.phase, c.act, c.after)
			}
			switch {
			case c.act == actFail && (a.err == nil || a.err.Status != c.errCode):
				t.Fatalf("failure %+v, want status %d", a.err, c.errCode)
			case c.act != actFail && a.err != nil:
				t.Fatalf("unexpected failure %+v", a.err)
			}
		})
	}
}

func TestPhaseAndActNames(t *testing.T) {
	t.Parallel()
	for p := phaseEnded; p <= phaseSearching; p++ {
		if s := p.String(); strings.HasPrefix(s, "phase(") {
			t.Errorf("phase %d has no name", int(p))
		}
	}
	if phase(99).String() != "phase(99)" || act(99).String() != "act(99)" {
		t.Error("unknown values are not shown as numbers")
	}
	if actCallModel.String() != "call-model" || phaseSearching.String() != "searching" {
		t.Error("names")
	}
}

var phaseNames = [...]string{"ended", "overdue", "undispatched", "waiting", "broken", "leased", "claimed", "garbled", "answered", "searching"}

func (p phase) String() string {
	if p >= 0 && int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("phase(%d)", int(p))
}

var actNames = [...]string{"wait", "retry", "call-model", "dispatch", "complete", "fail", "reject"}

func (a act) String() string {
	if a >= 0 && int(a) < len(actNames) {
		return actNames[a]
	}
	return fmt.Sprintf("act(%d)", int(a))
}
