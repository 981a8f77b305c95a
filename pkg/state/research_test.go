package state_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// A run is created once, shared by an identical request while it runs, written
// first-write-wins, its events appended once each, and its end drops the share.
func TestResearchRunLifecycle(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	r := &state.Run{ID: "rr_a", Tenant: "t1", Request: json.RawMessage(`{"input":"q"}`), Deadline: time.Now().Add(time.Minute)}
	if shared, err := s.Research.CreateRun(ctx, r, "h1"); err != nil || shared != "" {
		t.Fatalf("create: %q %v", shared, err)
	}
	if _, err := s.Research.CreateRun(ctx, &state.Run{ID: "rr_a", Tenant: "t1"}, ""); !errors.Is(err, state.ErrExists) {
		t.Fatalf("second create: %v", err)
	}
	if shared, err := s.Research.CreateRun(ctx, &state.Run{ID: "rr_b", Tenant: "t1"}, "h1"); err != nil || shared != "rr_a" {
		t.Fatalf("identical request: shared %q, %v; want rr_a", shared, err)
	}
	if shared, _ := s.Research.CreateRun(ctx, &state.Run{ID: "rr_c", Tenant: "t2"}, "h1"); shared != "" {
		t.Fatalf("another tenant shares %q", shared)
	}
	ev := func(k string) state.RunEventIn { return state.RunEventIn{Key: k, Data: []byte(`{"type":"` + k + `"}`)} }
	ok, err := s.Research.UpdateRun(ctx, "rr_a", state.RunUpdate{Status: state.RunInProgress, First: state.RunPlanField, Value: []byte(`{"q":1}`), Events: []state.RunEventIn{ev("plan")}})
	if !ok || err != nil {
		t.Fatalf("plan: %v %v", ok, err)
	}
	if _, err := s.Research.UpdateRun(ctx, "rr_a", state.RunUpdate{First: state.RunPlanField, Value: []byte(`{"q":2}`), Events: []state.RunEventIn{ev("plan2")}}); !errors.Is(err, state.ErrAnswerStood) {
		t.Fatalf("second plan: %v", err)
	}
	s.Research.UpdateRun(ctx, "rr_a", state.RunUpdate{Events: []state.RunEventIn{ev("plan"), ev("round")}})
	evs, err := s.Research.RunEvents(ctx, "rr_a", 0, 10)
	if err != nil || len(evs) != 2 || evs[1].Seq != 2 || string(evs[1].Data) != `{"type":"round"}` {
		t.Fatalf("events: %+v %v", evs, err)
	}
	if rest, _ := s.Research.RunEvents(ctx, "rr_a", 1, 10); len(rest) != 1 || rest[0].Seq != 2 {
		t.Fatalf("events after 1: %+v", rest)
	}
	got, err := s.Research.GetRun(ctx, "rr_a")
	if err != nil || string(got.Plan) != `{"q":1}` || got.Status != state.RunInProgress || got.Tenant != "t1" {
		t.Fatalf("run: %+v %v", got, err)
	}
	if ok, _ := s.Research.UpdateRun(ctx, "rr_a", state.RunUpdate{Status: state.RunCompleted}); !ok {
		t.Fatal("end did not write")
	}
	if ok, _ := s.Research.UpdateRun(ctx, "rr_a", state.RunUpdate{Status: state.RunFailed}); ok {
		t.Fatal("an ended run was ended again")
	}
	if shared, _ := s.Research.CreateRun(ctx, &state.Run{ID: "rr_d", Tenant: "t1"}, "h1"); shared != "" {
		t.Fatalf("an ended run is shared: %q", shared)
	}
	runs, more, err := s.Research.TenantRuns(ctx, "t1", "", 10)
	if err != nil || more || len(runs) != 2 || runs[0].ID != "rr_d" {
		t.Fatalf("list: %d %v %v", len(runs), more, err)
	}
}

// A child's end is counted once however often its terminal event is handled, its
// hold released and its spend counted; a cap refuses a step that would pass it.
func TestResearchChildrenAndBudget(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if _, err := s.Research.CreateRun(ctx, &state.Run{ID: "rr_x", Tenant: "t1"}, ""); err != nil {
		t.Fatal(err)
	}
	s.Research.UpdateRun(ctx, "rr_x", state.RunUpdate{First: state.RunQuestionsField(0), Value: []byte(`[]`), Fields: []any{state.RunSubmittedField(0), 3}})
	for _, c := range []string{"c1", "c2", "c3"} {
		if err := s.Research.ReserveRun(ctx, "rr_x", c, 0.3, 1); err != nil {
			t.Fatalf("reserve %s: %v", c, err)
		}
	}
	if err := s.Research.ReserveRun(ctx, "rr_x", "writer", 0.2, 1); !errors.Is(err, state.ErrRunBudget) {
		t.Fatalf("over the cap: %v", err)
	}
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			s.Research.ChildEnded(ctx, "rr_x", 0, "c1", "completed", 0.1, 0.05, []byte(`{"text":"x"}`), nil)
		})
	}
	wg.Wait()
	ended, sub, err := s.Research.ChildEnded(ctx, "rr_x", 0, "c2", "failed", 0, 0, []byte(`{}`), nil)
	if err != nil || ended != 2 || sub != 3 {
		t.Fatalf("ended %d of %d, %v", ended, sub, err)
	}
	if err := s.Research.ReserveRun(ctx, "rr_x", "c1", 0.3, 1); err != nil {
		t.Fatalf("an ended child reserved again: %v", err)
	}
	if err := s.Research.ReserveRun(ctx, "rr_x", "writer", 0.2, 1); err != nil {
		t.Fatalf("writer after children settled: %v", err)
	}
	s.Research.SettleRun(ctx, "rr_x", "writer", "model", 0.1)
	s.Research.SettleRun(ctx, "rr_x", "writer", "model", 0.1)
	r, _ := s.Research.GetRun(ctx, "rr_x")
	if r.Spent != 250000 || r.Held != 300000 || r.SpentByKind["model"] != 200000 || r.SpentByKind["search"] != 50000 || r.Ended["c1"] != "completed" || string(r.Findings["c1"]) != `{"text":"x"}` || r.Rounds[0].Ended != 2 {
		t.Fatalf("run: spent %d held %d by kind %v ended %v", r.Spent, r.Held, r.SpentByKind, r.Ended)
	}
	if _, _, err := s.Research.ChildEnded(ctx, "rr_gone", 0, "c", "completed", 0, 0, nil, nil); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("no run: %v", err)
	}
}
