package state_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// The job the end script reads back for a job with a callback (its terminal event's
// copy) is the job GetJob reads right after, field for field but its request, for a
// completed job, a failed one and a cancelled one; only the write that ends the job
// reads it back, and a job without a callback is not read back.
func TestFinishRecordIsWhatGetJobReads(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	request := json.RawMessage(`{"protocol":"chat","request":{"model":"m","messages":[{"role":"user","content":"hi \"there\""}]}}`)
	cases := []struct {
		name   string
		status state.Status
		fields []any
		// uncalled is a job without a callback.
		uncalled bool
	}{
		{"completed", state.Completed,
			[]any{"response", json.RawMessage(`{"text":"é ✓"}`), "usage", json.RawMessage(`{"searches":1}`), "trace", json.RawMessage(`[{"q":"x"}]`),
				state.TurnField(1), state.FirstWrite(`{"turn":1}`)}, false},
		{"failed", state.Failed, []any{"error", &state.JobError{Status: 502, Type: "upstream_error", Code: "c", Message: "it broke"}}, false},
		{"cancelled", state.Cancelled, nil, false},
		{"no callback", state.Completed, []any{"response", json.RawMessage(`{}`)}, true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := state.NewID("job_")
			now := time.Now().UTC()
			j := &state.Job{ID: id, Tenant: "t", Kind: "chat", Model: "m", Request: request, Created: now, Deadline: now.Add(time.Minute),
				Question: "hi", Callback: json.RawMessage(`{"url":"https://example.com"}`), Batch: "", HasStoredResponse: i%2 == 0}
			if c.uncalled {
				j.Callback = nil
			}
			if err := s.Jobs.CreateJob(ctx, j); err != nil {
				t.Fatal(err)
			}
			if ok, err := s.Jobs.Update(ctx, id, "", "question", "hi again"); err != nil || !ok {
				t.Fatalf("update: %v %v", ok, err)
			}
			time.Sleep(3 * time.Millisecond) // the ending's time is another millisecond
			won, ended, err := s.Jobs.FinishRecord(ctx, id, c.status, c.fields...)
			if err != nil || !won {
				t.Fatalf("FinishRecord = %v, %v", won, err)
			}
			if c.uncalled {
				if ended != nil {
					t.Fatalf("a job without a callback was read back: %+v", ended)
				}
				return
			}
			if ended == nil {
				t.Fatal("a job with a callback was not read back")
			}
			want, err := s.Jobs.GetJob(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			want.Request = nil
			if got := ended.Job(); !reflect.DeepEqual(got, want) {
				t.Fatalf("read back %+v\nGetJob reads %+v", got, want)
			}
			// A second ending moves nothing and reads nothing back.
			won, ended, err = s.Jobs.FinishRecord(ctx, id, state.Failed, "error", &state.JobError{Type: "x", Message: "late"})
			if err != nil || won || ended != nil {
				t.Fatalf("second FinishRecord = %v, %+v, %v", won, ended, err)
			}
		})
	}
}

// A hop's answer stored first by another worker moves nothing, as with Finish.
func TestFinishRecordAnswerStood(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	id := state.NewID("job_")
	if err := s.Jobs.CreateJob(ctx, &state.Job{ID: id, Kind: "chat", Callback: json.RawMessage(`{"url":"https://example.com"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Chains.SaveTurn(ctx, id, 1, []byte(`{"t":1}`), false, false); err != nil {
		t.Fatal(err)
	}
	won, ended, err := s.Jobs.FinishRecord(ctx, id, state.Completed, state.TurnField(1), state.FirstWrite(`{"t":2}`))
	if !errors.Is(err, state.ErrAnswerStood) || won || ended != nil {
		t.Fatalf("FinishRecord = %v, %+v, %v; want ErrAnswerStood", won, ended, err)
	}
	if st, _ := s.Jobs.JobStatus(ctx, id); st != state.Queued {
		t.Fatalf("status = %s, want queued", st)
	}
}
