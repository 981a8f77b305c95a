package research

import (
	"fmt"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// Every row of next's table.
func TestNext(t *testing.T) {
	planned := facts{status: state.RunInProgress, planned: true, maxRounds: 1}
	with := func(f facts, edit func(*facts)) facts { edit(&f); return f }
	r := func(sub, ended int, reflected bool) roundFacts {
		return roundFacts{submitted: sub, ended: ended, reflected: reflected}
	}
	for _, c := range []struct {
		name  string
		f     facts
		want  act
		round int
	}{
		{"ended", facts{status: state.RunCompleted}, actWait, 0},
		{"ended, its callback not told", facts{status: state.RunCompleted, hookDue: true}, actNotify, 0},
		{"ended, its batch line's job not, nor its callback", facts{status: state.RunFailed, lineOpen: true, hookDue: true}, actLine, 0},
		{"ended, its batch line's job not", facts{status: state.RunFailed, lineOpen: true}, actLine, 0},
		{"cancelled, its batch line's job not", facts{status: state.RunCancelled, cancel: true, lineOpen: true}, actLine, 0},
		{"cancelled", facts{status: state.RunInProgress, cancel: true, drafted: true}, actCancel, 0},
		{"cancelled, children out", facts{status: state.RunCancelled, cancel: true, running: 2}, actCancel, 0},
		{"cancelled, children ended", facts{status: state.RunCancelled, cancel: true}, actWait, 0},
		{"agent", facts{status: state.RunQueued, agent: true}, actAgent, 0},
		{"agent drafted", facts{status: state.RunInProgress, agent: true, drafted: true}, actVerify, 0},
		{"agent verified", facts{status: state.RunInProgress, agent: true, drafted: true, verified: true}, actComplete, 0},
		{"verified", with(planned, func(f *facts) { f.verified, f.drafted = true, true }), actComplete, 0},
		{"drafted", with(planned, func(f *facts) { f.drafted = true }), actVerify, 0},
		{"overdue before a plan", facts{status: state.RunQueued, overdue: true}, actFail, 0},
		{"spent before a plan", facts{status: state.RunQueued, stopped: "budget"}, actFail, 0},
		{"new", facts{status: state.RunQueued}, actPlan, 0},
		{"review waits", with(planned, func(f *facts) { f.review, f.status = true, state.RunRequiresAction }), actWait, 0},
		{"review waits, its callback not told", with(planned, func(f *facts) { f.review, f.status, f.hookDue = true, state.RunRequiresAction, true }), actNotify, 0},
		{"review", with(planned, func(f *facts) { f.review = true }), actReview, 0},
		{"approved", with(planned, func(f *facts) { f.review, f.approved = true, true }), actSubmit, 0},
		{"overdue", with(planned, func(f *facts) { f.overdue, f.rounds = true, []roundFacts{r(3, 1, false)} }), actStop, 0},
		{"stopped with findings", with(planned, func(f *facts) { f.overdue, f.stopped, f.found = true, "deadline", 1 }), actWrite, 0},
		{"stopped without", with(planned, func(f *facts) { f.stopped = "budget" }), actFail, 0},
		{"spent, children out", with(planned, func(f *facts) { f.stopped, f.rounds = "budget", []roundFacts{r(2, 1, false)} }), actWait, 0},
		{"first round", planned, actSubmit, 0},
		{"round written, not submitted", with(planned, func(f *facts) { f.rounds = []roundFacts{r(3, 3, true), r(0, 0, false)} }), actSubmit, 1},
		{"children out", with(planned, func(f *facts) { f.rounds = []roundFacts{r(3, 2, false)} }), actWait, 0},
		{"reflect", with(planned, func(f *facts) { f.rounds, f.found = []roundFacts{r(3, 3, false)}, 3 }), actReflect, 0},
		{"last round: no reflection", with(planned, func(f *facts) { f.rounds, f.found = []roundFacts{r(3, 3, true), r(2, 2, false)}, 5 }), actWrite, 0},
		{"reflected, no gaps", with(planned, func(f *facts) { f.rounds, f.found = []roundFacts{r(3, 3, true)}, 3 }), actWrite, 0},
		{"nothing found", with(planned, func(f *facts) { f.rounds = []roundFacts{r(3, 3, true)} }), actFail, 0},
	} {
		got := next(c.f)
		if got.act != c.want || got.round != c.round {
			t.Errorf("%s: next = %s round %d, want %s round %d", c.name, got.act, got.round, c.want, c.round)
		}
	}
}

// Verification keeps a marker its source supports, removes one no source has or
// whose source does not say it (the sentence then marked unverified), and appends the
// numbered source list.
func TestVerify(t *testing.T) {
	d := Draft{
		Report: "## Findings\n\nThe bridge opened in 1932 after eight years of work [1]. The moon is made of cheese [2]. Also this [9].",
		Sources: []Source{
			{URL: "https://a.example/bridge", Title: "Bridge", Excerpt: "The bridge opened in 1932, after eight years of work."},
			{URL: "https://b.example/moon", Title: "Moon", Excerpt: "The moon is a rocky body with no atmosphere."},
		},
	}
	out := Verify(d)
	want := "## Findings\n\nThe bridge opened in 1932 after eight years of work [1]. The moon is made of cheese _(unverified)_. Also this _(unverified)_.\n\n## Sources\n\n1. [Bridge](https://a.example/bridge)\n2. [Moon](https://b.example/moon)"
	if out.Report != want {
		t.Errorf("report:\n%s\nwant:\n%s", out.Report, want)
	}
	if out.Citations != (Citations{Cited: 3, Valid: 1, Removed: 2}) {
		t.Errorf("citations = %+v", out.Citations)
	}
}

// A child's id carries its round and index, and nothing else reads as one.
func TestChildID(t *testing.T) {
	id := childID("rr_abc", 2, 11)
	if r, i, ok := roundOf("rr_abc", id); !ok || r != 2 || i != 11 {
		t.Fatalf("roundOf(%s) = %d %d %v", id, r, i, ok)
	}
	if _, _, ok := roundOf("rr_abd", id); ok {
		t.Fatal("another run's child read as this run's")
	}
}

var actNames = [...]string{"wait", "cancel", "agent", "plan", "review", "submit", "reflect", "write", "verify", "complete", "fail", "stop", "line", "notify"}

func (a act) String() string {
	if a >= 0 && int(a) < len(actNames) {
		return actNames[a]
	}
	return fmt.Sprintf("act(%d)", int(a))
}
