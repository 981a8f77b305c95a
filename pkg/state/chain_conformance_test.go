package state_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/chat"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// chainStore is a chain store a test can put jobs in.
type chainStore interface {
	chat.ChainStore
	CreateJob(ctx context.Context, j *state.Job) error
	// What ending a job needs (jobs.Store, jobs.ReaperStore): the suite keeps a
	// store's endings as honest as its chains.
	// Finish moves a job that has not ended to a terminal status with fields
	// ("response", "usage", "trace", "error"). It reports whether it moved the job: a
	// terminal status is never overwritten.
	Finish(ctx context.Context, id string, status state.Status, fields ...any) (bool, error)
	JobStatus(ctx context.Context, id string) (state.Status, error)
	GetJob(ctx context.Context, id string) (*state.Job, error)

	// LockReaper, Overdue and ForgetDeadline serve the deadline reaper.
	LockReaper(ctx context.Context, owner string, ttl time.Duration) (bool, error)
	Overdue(ctx context.Context, now time.Time, n int64) ([]string, error)
	ForgetDeadline(ctx context.Context, id string) error
	// Settle (jobs.Store) puts back the terminal status the event stream recorded.
	Settle(ctx context.Context, id string, status state.Status, je *state.JobError) error
	// SaveSearchResult (search.Calls) is how a search worker stores a chain's result
	// before its resume records it.
	SaveSearchResult(ctx context.Context, id string, h int, call string, b []byte, rec *state.Recording) error
}

// TestChainStoreConformance is the conformance suite of chat.ChainStore: the
// semantics the chat chain relies on to be replayable by any worker at any point.
func TestChainStoreConformance(t *testing.T) {
	conform(t, func(s flat) chainStore { return s }, []conformCase[chainStore]{
		{"TurnFirstWriteWins", turnFirstWriteWins},
		{"TurnRaceAgrees", turnRaceAgrees},
		{"CallsRecordedOnce", callsRecordedOnce},
		{"CallsReportCancel", callsReportCancel},
		{"TurnAndCallsStoredTogether", turnAndCalls},
		{"ResultsRecordedOnceAndCounted", resultsRecordedOnce},
		{"CompletingResultClaimsNextHop", completingResultClaims},
		{"RecordAndLoadReadsItsWrite", recordAndLoadReads},
		{"SearchWorkersResultIsRead", searchWorkersResult},
		{"LeaseHeldRenewedLapsing", leaseHeldRenewedLapsing},
		{"KeptLeaseOutlivesTTL", keptLease},
		{"FinishNeverOverwritesTerminal", finishNeverOverwrites},
		{"FinishStoresTheAnswerOnce", finishStoresTheAnswer},
		{"StickyFlags", stickyFlags},
		{"Deadlines", deadlines},
		{"NotFound", chainNotFound},
	})
}

func mustJob(t *testing.T, s chainStore, id string, deadline time.Time) {
	t.Helper()
	if err := s.CreateJob(context.Background(), &state.Job{ID: id, Kind: "chat", Model: "m", Request: json.RawMessage(`{"model":"m"}`), Deadline: deadline}); err != nil {
		t.Fatal(err)
	}
}

func loadStep(t *testing.T, s chainStore, id string, claim *state.Claim) *state.Step {
	t.Helper()
	st, err := s.LoadStep(context.Background(), id, claim)
	if err != nil {
		t.Fatalf("LoadStep %s: %v", id, err)
	}
	return st
}

func turnFirstWriteWins(t *testing.T, s chainStore) {
	ctx := context.Background()
	mustJob(t, s, "j", time.Time{})
	if v, err := s.SaveTurn(ctx, "j", 0, []byte(`{"t":1}`), false, false); err != nil || string(v) != `{"t":1}` {
		t.Fatalf("first SaveTurn = %s, %v", v, err)
	}
	if v, _ := s.SaveTurn(ctx, "j", 0, []byte(`{"t":2}`), true, true); string(v) != `{"t":1}` {
		t.Fatalf("second SaveTurn returned %s, want the first answer", v)
	}
	if v, _ := s.SaveTurn(ctx, "j", 1, []byte(`{"t":3}`), true, true); string(v) != `{"t":3}` {
		t.Fatalf("hop 1 SaveTurn returned %s", v)
	}
	st := loadStep(t, s, "j", nil)
	if st.Job.Status != state.Running {
		t.Errorf("status after the first turn %q, want running", st.Job.Status)
	}
	if string(st.Chain.Hops[0].Turn) != `{"t":1}` || string(st.Chain.Hops[1].Turn) != `{"t":3}` {
		t.Errorf("turns %s %s", st.Chain.Hops[0].Turn, st.Chain.Hops[1].Turn)
	}
	if st.Chain.Hops[0].Expected != -1 || st.Chain.Hops[0].Calls != nil {
		t.Errorf("an answered hop is not dispatched: %+v", st.Chain.Hops[0])
	}
	// The flags are the first hop's latest answer's: later hops keep them.
	if !st.Chain.Sticky || !st.Chain.GooglePreferred {
		t.Errorf("flags sticky=%v gp=%v, want both set", st.Chain.Sticky, st.Chain.GooglePreferred)
	}
}

func turnRaceAgrees(t *testing.T, s chainStore) {
	ctx := context.Background()
	mustJob(t, s, "j", time.Time{})
	var wg sync.WaitGroup
	got := make([]string, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := s.SaveTurn(ctx, "j", 0, []byte(fmt.Sprintf(`{"w":%d}`, i)), false, false)
			if err != nil {
				t.Error(err)
			}
			got[i] = string(v)
		}()
	}
	wg.Wait()
	for _, g := range got {
		if g != got[0] {
			t.Fatalf("racing workers stored different answers: %v", got)
		}
	}
}

func callsRecordedOnce(t *testing.T, s chainStore) {
	ctx := context.Background()
	mustJob(t, s, "j", time.Time{})
	if st, err := s.SaveCalls(ctx, "j", 0, []byte(`["a","b"]`), 2, 2); err != nil || st != state.Queued {
		t.Fatalf("SaveCalls = %q, %v; want the job's status", st, err)
	}
	// A replayed dispatch (with a plan made again) changes nothing: the search
	// counter is added to once.
	if _, err := s.SaveCalls(ctx, "j", 0, []byte(`["x"]`), 1, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveCalls(ctx, "j", 1, []byte(`["c"]`), 1, 0); err != nil {
		t.Fatal(err)
	}
	st := loadStep(t, s, "j", nil)
	h0 := st.Chain.Hops[0]
	if string(h0.Calls) != `["a","b"]` || h0.Expected != 2 || len(h0.Results) != 0 {
		t.Fatalf("hop 0 = calls %s expected %d results %d", h0.Calls, h0.Expected, len(h0.Results))
	}
	if st.Chain.Searches != 2 {
		t.Errorf("searches %d, want 2 (counted once, local calls not at all)", st.Chain.Searches)
	}
	if !st.Chain.Sticky {
		t.Error("a dispatched web_search call does not make the chain sticky")
	}
}

func callsReportCancel(t *testing.T, s chainStore) {
	ctx := context.Background()
	mustJob(t, s, "j", time.Time{})
	if ok, err := s.Finish(ctx, "j", state.Cancelled); err != nil || !ok {
		t.Fatalf("cancel = %v, %v", ok, err)
	}
	if st, err := s.SaveCalls(ctx, "j", 0, []byte(`["a"]`), 1, 1); err != nil || st != state.Cancelled {
		t.Fatalf("SaveCalls on a cancelled job = %q, %v", st, err)
	}
}

// SaveTurnAndCalls is SaveTurn then SaveCalls: the answer and its calls stored
// once, the flags and running on hop 0; another answer stored first is returned and
// no calls are recorded for it; an ended job gets its answer, not its calls.
func turnAndCalls(t *testing.T, s chainStore) {
	ctx := context.Background()
	mustJob(t, s, "j", time.Time{})
	for range 2 { // a replay (the same answer) changes nothing
		st, got, err := s.SaveTurnAndCalls(ctx, "j", 0, []byte(`{"t":1}`), false, true, []byte(`["a"]`), 1, 1)
		if err != nil || st != state.Running || string(got) != `{"t":1}` {
			t.Fatalf("SaveTurnAndCalls = %q, %s, %v", st, got, err)
		}
	}
	step := loadStep(t, s, "j", nil)
	h0 := step.Chain.Hops[0]
	if step.Job.Status != state.Running || string(h0.Turn) != `{"t":1}` || string(h0.Calls) != `["a"]` || h0.Expected != 1 ||
		step.Chain.Searches != 1 || !step.Chain.Sticky || !step.Chain.GooglePreferred {
		t.Fatalf("after SaveTurnAndCalls: status %s, hop 0 %+v, chain %+v", step.Job.Status, h0, step.Chain)
	}
	// Another worker's answer to hop 1 stands: its calls are not this one's.
	if _, err := s.SaveTurn(ctx, "j", 1, []byte(`{"t":"other"}`), false, false); err != nil {
		t.Fatal(err)
	}
	st, got, err := s.SaveTurnAndCalls(ctx, "j", 1, []byte(`{"t":2}`), false, false, []byte(`["b"]`), 1, 1)
	if err != nil || st != state.Running || string(got) != `{"t":"other"}` {
		t.Fatalf("over another answer = %q, %s, %v", st, got, err)
	}
	if step := loadStep(t, s, "j", nil); step.Chain.Hops[1].Calls != nil || step.Chain.Searches != 1 {
		t.Fatalf("calls recorded for an answer that did not stand: %+v, searches %d", step.Chain.Hops[1], step.Chain.Searches)
	}
	if ok, err := s.Finish(ctx, "j", state.Cancelled); err != nil || !ok {
		t.Fatal(ok, err)
	}
	st, got, err = s.SaveTurnAndCalls(ctx, "j", 2, []byte(`{"t":3}`), false, false, []byte(`["c"]`), 1, 1)
	if err != nil || st != state.Cancelled || string(got) != `{"t":3}` {
		t.Fatalf("on a cancelled job = %q, %s, %v", st, got, err)
	}
	if step := loadStep(t, s, "j", nil); step.Chain.Hops[2] == nil || string(step.Chain.Hops[2].Turn) != `{"t":3}` || step.Chain.Hops[2].Calls != nil {
		t.Fatalf("a cancelled job's hop 2: %+v", step.Chain.Hops[2])
	}
	if st, _, err := s.SaveTurnAndCalls(ctx, "gone", 0, []byte(`{}`), false, false, []byte(`[]`), 0, 0); err != nil || st != "" {
		t.Fatalf("a job that is gone = %q, %v", st, err)
	}
}

// Finish with a hop's answer (a FirstWrite) stores it with the ending; where
// another answer to the hop is stored, it writes nothing (ErrAnswerStood).
func finishStoresTheAnswer(t *testing.T, s chainStore) {
	ctx := context.Background()
	mustJob(t, s, "a", time.Time{})
	mustJob(t, s, "b", time.Time{})
	ok, err := s.Finish(ctx, "a", state.Completed, "response", json.RawMessage(`{"r":1}`), state.TurnField(1), state.FirstWrite(`{"t":1}`))
	if err != nil || !ok {
		t.Fatalf("finish with the answer = %v, %v", ok, err)
	}
	if st := loadStep(t, s, "a", nil); st.Job.Status != state.Completed || string(st.Chain.Hops[1].Turn) != `{"t":1}` {
		t.Fatalf("after the finish: %s, hop 1 %+v", st.Job.Status, st.Chain.Hops[1])
	}
	if _, err := s.SaveTurn(ctx, "b", 1, []byte(`{"t":"other"}`), false, false); err != nil {
		t.Fatal(err)
	}
	ok, err = s.Finish(ctx, "b", state.Completed, "response", json.RawMessage(`{"r":2}`), state.TurnField(1), state.FirstWrite(`{"t":2}`))
	if ok || !errors.Is(err, state.ErrAnswerStood) {
		t.Fatalf("finish over another answer = %v, %v; want ErrAnswerStood", ok, err)
	}
	if st := loadStep(t, s, "b", nil); st.Job.Status.Terminal() || string(st.Chain.Hops[1].Turn) != `{"t":"other"}` {
		t.Fatalf("after the refused finish: %s, hop 1 %+v", st.Job.Status, st.Chain.Hops[1])
	}
	// The same answer, stored before (a replay), finishes.
	if ok, err := s.Finish(ctx, "b", state.Completed, state.TurnField(1), state.FirstWrite(`{"t":"other"}`)); err != nil || !ok {
		t.Fatalf("finish with the stored answer = %v, %v", ok, err)
	}
}

func resultsRecordedOnce(t *testing.T, s chainStore) {
	ctx := context.Background()
	mustJob(t, s, "j", time.Time{})
	// A result before its hop's dispatch is recorded, and the hop waits for -1.
	if have, want, err := s.RecordResult(ctx, "j", 3, "early", []byte(`"e"`)); err != nil || have != 1 || want != -1 {
		t.Fatalf("result before dispatch = %d/%d, %v", have, want, err)
	}
	if _, err := s.SaveCalls(ctx, "j", 1, []byte(`["a","b"]`), 2, 2); err != nil {
		t.Fatal(err)
	}
	check := func(call, result string, wantHave int) {
		t.Helper()
		have, want, err := s.RecordResult(ctx, "j", 1, call, []byte(result))
		if err != nil || have != wantHave || want != 2 {
			t.Fatalf("RecordResult %s = %d/%d, %v; want %d/2", call, have, want, err, wantHave)
		}
	}
	check("a", `"ra"`, 1)
	check("a", `"ra-again"`, 1)
	check("b", `"rb"`, 2)
	st := loadStep(t, s, "j", nil)
	rs := st.Chain.Hops[1].Results
	if len(rs) != 2 || string(rs["a"]) != `"ra"` || string(rs["b"]) != `"rb"` {
		t.Fatalf("results %v", rs)
	}
	if st.Chain.Hops[3].Expected != -1 || len(st.Chain.Hops[3].Results) != 1 {
		t.Fatalf("undispatched hop %+v", st.Chain.Hops[3])
	}
}

func completingResultClaims(t *testing.T, s chainStore) {
	ctx := context.Background()
	mustJob(t, s, "j", time.Time{})
	if _, err := s.SaveCalls(ctx, "j", 0, []byte(`[]`), 2, 2); err != nil {
		t.Fatal(err)
	}
	st, err := s.RecordAndLoad(ctx, "j", 0, "a", []byte(`{"a":1}`), "w1", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st.Have != 1 || st.Want != 2 || st.Claimed {
		t.Fatalf("first of two: have %d want %d claimed %v", st.Have, st.Want, st.Claimed)
	}
	st, err = s.RecordAndLoad(ctx, "j", 0, "b", []byte(`{"b":1}`), "w2", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st.Have != 2 || st.Want != 2 || !st.Claimed || st.Job.ID != "j" || len(st.Chain.Hops[0].Results) != 2 {
		t.Fatalf("completing result: have %d want %d claimed %v job %q results %d", st.Have, st.Want, st.Claimed, st.Job.ID, len(st.Chain.Hops[0].Results))
	}
	// A replay of the first result keeps its place and claims nothing: the completing
	// result's resume runs the next hop.
	st, _ = s.RecordAndLoad(ctx, "j", 0, "a", []byte(`{"a":2}`), "w1", time.Second)
	if st.Have != 1 || st.Want != 2 || st.Claimed || st.Left != 0 || string(st.Chain.Hops[0].Results["a"]) != `{"a":1}` {
		t.Fatalf("replay of a: have %d claimed %v left %s result %s", st.Have, st.Claimed, st.Left, st.Chain.Hops[0].Results["a"])
	}
	// A replay of the completing result by another worker finds the next hop claimed
	// by w2.
	st, _ = s.RecordAndLoad(ctx, "j", 0, "b", []byte(`{"b":2}`), "w1", time.Second)
	if st.Have != 2 || st.Claimed || st.Left <= 0 || st.Left > time.Second || string(st.Chain.Hops[0].Results["b"]) != `{"b":1}` {
		t.Fatalf("replay of b: have %d claimed %v left %s result %s", st.Have, st.Claimed, st.Left, st.Chain.Hops[0].Results["b"])
	}
	// The claim is hop 1's lease: w2 holds it for its LoadStep too.
	if st := loadStep(t, s, "j", &state.Claim{Hop: 1, Owner: "w2", TTL: time.Second}); !st.Claimed {
		t.Fatal("the completing worker does not hold the next hop's lease")
	}
	if st := loadStep(t, s, "j", &state.Claim{Hop: 1, Owner: "w1", TTL: time.Second}); st.Claimed {
		t.Fatal("another worker took the next hop's lease")
	}
}

// recordAndLoadReads: the step RecordAndLoad returns is the job and chain as a read
// right after the write finds them (the turn, calls, flags and counts stored before,
// the result just recorded), whether the result is new, a replay, the one that
// completes the hop, or one arriving after the job ended.
func recordAndLoadReads(t *testing.T, s chainStore) {
	ctx := context.Background()
	mustJob(t, s, "j", time.Time{})
	if _, _, err := s.SaveTurnAndCalls(ctx, "j", 0, []byte(`{"t":0}`), true, false, []byte(`["a","b"]`), 2, 2); err != nil {
		t.Fatal(err)
	}
	same := func(what string, got *state.Step) {
		t.Helper()
		want := loadStep(t, s, "j", nil)
		if !reflect.DeepEqual(got.Job, want.Job) || !reflect.DeepEqual(got.Chain, want.Chain) {
			t.Fatalf("%s: RecordAndLoad read %+v %+v (hop 0 %+v), a read after it %+v %+v (hop 0 %+v)",
				what, got.Job, got.Chain, got.Chain.Hops[0], want.Job, want.Chain, want.Chain.Hops[0])
		}
	}
	record := func(what, call, result string, wantHave int) *state.Step {
		t.Helper()
		st, err := s.RecordAndLoad(ctx, "j", 0, call, []byte(result), "w", time.Second)
		if err != nil || st.Have != wantHave || st.Want != 2 {
			t.Fatalf("%s: RecordAndLoad = %+v, %v; want %d/2", what, st, err, wantHave)
		}
		same(what, st)
		return st
	}
	if st := record("first result", "a", `{"a":1}`, 1); string(st.Chain.Hops[0].Results["a"]) != `{"a":1}` || st.Chain.Searches != 2 || !st.Chain.Sticky {
		t.Fatalf("first result: chain %+v, hop 0 %+v", st.Chain, st.Chain.Hops[0])
	}
	record("a replay", "a", `{"a":2}`, 1)
	if st := record("the completing result", "b", `{"b":1}`, 2); len(st.Chain.Hops[0].Results) != 2 || string(st.Chain.Hops[0].Turn) != `{"t":0}` {
		t.Fatalf("completing result: hop 0 %+v", st.Chain.Hops[0])
	}
	if ok, err := s.Finish(ctx, "j", state.Completed, "response", json.RawMessage(`{"ok":true}`)); err != nil || !ok {
		t.Fatalf("Finish = %v, %v", ok, err)
	}
	if st := record("a replay after the end", "b", `{"b":2}`, 2); st.Job.Status != state.Completed {
		t.Fatalf("after the end: status %s", st.Job.Status)
	}
}

// searchWorkersResult: a result the search worker stored (SaveSearchResult) is the
// chain's: its resume reads it, writing nothing, and the result stored last, in
// whichever order the resumes come, is the one that completes the hop and claims the
// next one; results stored either way count together.
func searchWorkersResult(t *testing.T, s chainStore) {
	ctx := context.Background()
	mustJob(t, s, "j", time.Time{})
	if _, err := s.SaveCalls(ctx, "j", 0, []byte(`["a","b"]`), 2, 2); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ call, result string }{{"b", `{"b":1}`}, {"a", `{"a":1}`}, {"a", `{"a":2}`}} {
		if err := s.SaveSearchResult(ctx, "j", 0, r.call, []byte(r.result), nil); err != nil {
			t.Fatal(err)
		}
	}
	// a was stored last: b's resume, though it finds every result in, claims nothing.
	st, err := s.RecordAndLoad(ctx, "j", 0, "b", []byte(`{"b":9}`), "w1", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rs := st.Chain.Hops[0].Results
	if st.Have != 1 || st.Want != 2 || st.Claimed || st.Left != 0 || len(rs) != 2 || string(rs["a"]) != `{"a":1}` || string(rs["b"]) != `{"b":1}` {
		t.Fatalf("b's resume: have %d/%d claimed %v left %s results %s", st.Have, st.Want, st.Claimed, st.Left, rs)
	}
	st, err = s.RecordAndLoad(ctx, "j", 0, "a", []byte(`{"a":9}`), "w2", time.Second)
	if err != nil || st.Have != 2 || st.Want != 2 || !st.Claimed {
		t.Fatalf("a's resume = %+v, %v; want 2/2, hop 1 claimed", st, err)
	}
	if have, want, err := s.RecordResult(ctx, "j", 0, "a", []byte(`{"a":9}`)); err != nil || have != 2 || want != 2 {
		t.Fatalf("RecordResult of a stored result = %d/%d, %v", have, want, err)
	}
	if st := loadStep(t, s, "j", &state.Claim{Hop: 1, Owner: "w1", TTL: time.Second}); st.Claimed {
		t.Fatal("another worker took the next hop's lease")
	}
	// Hop 1: one result recorded by its resume, then one stored by the search worker.
	if _, err := s.SaveCalls(ctx, "j", 1, []byte(`["x","y"]`), 2, 2); err != nil {
		t.Fatal(err)
	}
	if st, err := s.RecordAndLoad(ctx, "j", 1, "x", []byte(`{"x":1}`), "w1", time.Second); err != nil || st.Have != 1 || st.Claimed {
		t.Fatalf("x's resume = %+v, %v", st, err)
	}
	if err := s.SaveSearchResult(ctx, "j", 1, "y", []byte(`{"y":1}`), nil); err != nil {
		t.Fatal(err)
	}
	st, err = s.RecordAndLoad(ctx, "j", 1, "y", []byte(`{"y":9}`), "w1", time.Second)
	if err != nil || st.Have != 2 || !st.Claimed || string(st.Chain.Hops[1].Results["y"]) != `{"y":1}` {
		t.Fatalf("y's resume = %+v, %v; want 2/2, hop 2 claimed, the stored result", st, err)
	}
}

func leaseHeldRenewedLapsing(t *testing.T, s chainStore) {
	mustJob(t, s, "j", time.Time{})
	const ttl = 300 * time.Millisecond
	claim := func(owner string) *state.Step {
		return loadStep(t, s, "j", &state.Claim{Hop: 0, Owner: owner, TTL: ttl})
	}
	if st := claim("w1"); !st.Claimed || st.Left != 0 {
		t.Fatalf("free lease: claimed %v left %s", st.Claimed, st.Left)
	}
	st := claim("w2")
	if st.Claimed || st.Left <= 0 || st.Left > ttl {
		t.Fatalf("held lease: claimed %v left %s, want another holder's time left (0, %s]", st.Claimed, st.Left, ttl)
	}
	time.Sleep(ttl / 2)
	if st := claim("w1"); !st.Claimed {
		t.Fatal("the holder's claim was not renewed")
	}
	if st := claim("w2"); st.Claimed || st.Left <= ttl/2 {
		t.Fatalf("after renewal: claimed %v left %s, want more than %s", st.Claimed, st.Left, ttl/2)
	}
	// Other hops have leases of their own.
	if st := loadStep(t, s, "j", &state.Claim{Hop: 1, Owner: "w2", TTL: ttl}); !st.Claimed {
		t.Fatal("hop 1's lease is held by hop 0's holder")
	}
	eventually(t, 3*ttl, func() bool { return claim("w2").Claimed })
}

func keptLease(t *testing.T, s chainStore) {
	mustJob(t, s, "j", time.Time{})
	// Renewed every third of the TTL: at 150 ms a loaded machine's scheduler stalled
	// the renewals past it (make test at load 13–20).
	const ttl = 600 * time.Millisecond
	claim := func(h int, owner string) *state.Step {
		return loadStep(t, s, "j", &state.Claim{Hop: h, Owner: owner, TTL: ttl})
	}
	if !claim(0, "w1").Claimed {
		t.Fatal("free lease not claimed")
	}
	release := s.KeepHop("j", 0, "w1", ttl)
	time.Sleep(3 * ttl)
	if st := claim(0, "w2"); st.Claimed || st.Left <= 0 {
		t.Fatalf("a kept lease lapsed: claimed %v left %s", st.Claimed, st.Left)
	}
	release(true)
	if !claim(0, "w2").Claimed {
		t.Fatal("a dropped lease is not free at once")
	}
	// Released without drop, a lease lapses on its own within its ttl.
	if !claim(1, "w1").Claimed {
		t.Fatal("free lease not claimed")
	}
	release = s.KeepHop("j", 1, "w1", ttl)
	release(false)
	release(true) // a second call does nothing
	if claim(1, "w2").Claimed {
		t.Fatal("a lease released without drop was freed at once")
	}
	eventually(t, 3*ttl, func() bool { return claim(1, "w2").Claimed })
}

func finishNeverOverwrites(t *testing.T, s chainStore) {
	ctx := context.Background()
	mustJob(t, s, "c", time.Now().Add(time.Hour))
	ok, err := s.Finish(ctx, "c", state.Completed, "response", json.RawMessage(`{"ok":true}`), "usage", []byte(`{"u":1}`), "trace", []byte(`[]`))
	if err != nil || !ok {
		t.Fatalf("completing = %v, %v", ok, err)
	}
	if ok, _ := s.Finish(ctx, "c", state.Failed, "error", &state.JobError{Type: "x", Message: "late"}); ok {
		t.Fatal("completed → failed was allowed")
	}
	if ok, _ := s.Finish(ctx, "c", state.Completed, "response", json.RawMessage(`{"ok":false}`)); ok {
		t.Fatal("a replayed completion moved the job again")
	}
	j, err := s.GetJob(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != state.Completed || string(j.Response) != `{"ok":true}` || string(j.Usage) != `{"u":1}` || string(j.Trace) != `[]` || j.Error != nil || j.Finished.IsZero() {
		t.Fatalf("job after end = %+v", j)
	}
	if st, _ := s.JobStatus(ctx, "c"); st != state.Completed {
		t.Fatalf("status %q", st)
	}
	mustJob(t, s, "f", time.Time{})
	je := &state.JobError{Status: 504, Type: "timeout", Code: "job_deadline_exceeded", Message: "late"}
	if ok, _ := s.Finish(ctx, "f", state.Failed, "error", je); !ok {
		t.Fatal("failing refused")
	}
	if j, _ := s.GetJob(ctx, "f"); j.Status != state.Failed || j.Error == nil || *j.Error != *je {
		t.Fatalf("failed job = %+v", j)
	}
	if ok, err := s.Finish(ctx, "missing", state.Failed); ok || err != nil {
		t.Fatalf("finishing a missing job = %v, %v", ok, err)
	}
	// Settle is the one write over a terminal status: the event stream's record of
	// how the job ended, after Redis lost it.
	if err := s.Settle(ctx, "c", state.Cancelled, nil); err != nil {
		t.Fatal(err)
	}
	if j, _ := s.GetJob(ctx, "c"); j.Status != state.Cancelled || string(j.Response) != `{"ok":true}` {
		t.Fatalf("settled job = %+v", j)
	}
	if err := s.Settle(ctx, "f", state.Failed, je); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(ctx, "missing", state.Completed, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetJob(ctx, "missing"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("settling a missing job created it: %v", err)
	}
}

func stickyFlags(t *testing.T, s chainStore) {
	ctx := context.Background()
	mustJob(t, s, "j", time.Time{})
	if _, err := s.SaveTurn(ctx, "j", 0, []byte(`{}`), true, true); err != nil {
		t.Fatal(err)
	}
	if c := loadStep(t, s, "j", nil).Chain; !c.Sticky || !c.GooglePreferred {
		t.Fatalf("flags not stored: %+v", c)
	}
	if sticky, err := s.StickyConversation(ctx, "h1"); err != nil || sticky {
		t.Fatalf("unknown conversation sticky = %v, %v", sticky, err)
	}
	if err := s.MarkStickyConversation(ctx, "h1", time.Minute); err != nil {
		t.Fatal(err)
	}
	if sticky, _ := s.StickyConversation(ctx, "h1"); !sticky {
		t.Fatal("marked conversation is not sticky")
	}
	if sticky, _ := s.StickyConversation(ctx, "h2"); sticky {
		t.Fatal("another conversation is sticky")
	}
}

func deadlines(t *testing.T, s chainStore) {
	ctx := context.Background()
	past := time.Now().Add(-time.Minute)
	mustJob(t, s, "late1", past)
	mustJob(t, s, "late2", past.Add(time.Second))
	mustJob(t, s, "early", time.Now().Add(time.Hour))
	mustJob(t, s, "none", time.Time{})
	ids, err := s.Overdue(ctx, time.Now(), 10)
	if err != nil || len(ids) != 2 || ids[0] != "late1" || ids[1] != "late2" {
		t.Fatalf("overdue = %v, %v", ids, err)
	}
	if ids, _ := s.Overdue(ctx, time.Now(), 1); len(ids) != 1 {
		t.Fatalf("overdue limited to 1 = %v", ids)
	}
	// Ending a job keeps its deadline: the finisher (jobs.Finisher) forgets it once the
	// terminal event is out, so the reaper repairs an ending that crashed between its
	// two writes.
	s.Finish(ctx, "late1", state.Failed)
	if ids, _ := s.Overdue(ctx, time.Now(), 10); len(ids) != 2 {
		t.Fatalf("overdue after ending = %v, want both still due", ids)
	}
	s.ForgetDeadline(ctx, "late1")
	s.ForgetDeadline(ctx, "late2")
	if ids, _ := s.Overdue(ctx, time.Now(), 10); len(ids) != 0 {
		t.Fatalf("overdue after forgetting = %v", ids)
	}
	if got, err := s.LockReaper(ctx, "w1", time.Minute); err != nil || !got {
		t.Fatalf("first reaper lock = %v, %v", got, err)
	}
	if got, _ := s.LockReaper(ctx, "w2", time.Minute); got {
		t.Fatal("two reapers hold the lock")
	}
}

func chainNotFound(t *testing.T, s chainStore) {
	ctx := context.Background()
	if _, err := s.LoadStep(ctx, "nope", &state.Claim{Hop: 0, Owner: "w", TTL: time.Second}); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("LoadStep = %v", err)
	}
	if _, err := s.RecordAndLoad(ctx, "nope", 0, "a", []byte(`1`), "w", time.Second); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("RecordAndLoad = %v", err)
	}
	if _, err := s.JobStatus(ctx, "nope"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("JobStatus = %v", err)
	}
	if _, err := s.GetJob(ctx, "nope"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("GetJob = %v", err)
	}
	mustJob(t, s, "j", time.Time{})
	if err := s.CreateJob(ctx, &state.Job{ID: "j", Kind: "chat"}); !errors.Is(err, state.ErrExists) {
		t.Errorf("second CreateJob = %v", err)
	}
}
