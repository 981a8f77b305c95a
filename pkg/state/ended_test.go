package state_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// The job the end script hands to a waiting ingress is the job GetJob reads right
// after, field for field, whether the ender holds the request or the script reads it,
// for a completed job and a failed one; only the write that ends the job hands it
// over; a job that names no ingress is read back for its callback (its terminal
// event's copy) and a job with neither is not read back.
func TestFinishRecordIsWhatGetJobReads(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	request := json.RawMessage(`{"protocol":"chat","request":{"model":"m","messages":[{"role":"user","content":"hi \"there\""}]}}`)
	cases := []struct {
		name    string
		held    json.RawMessage // the request as the ender holds it
		status  state.Status
		fields  []any
		ingress string
		// uncalled is a job without a callback.
		uncalled bool
	}{
		{"completed, request held", request, state.Completed,
			[]any{"response", json.RawMessage(`{"text":"é ✓"}`), "usage", json.RawMessage(`{"searches":1}`), "trace", json.RawMessage(`[{"q":"x"}]`),
				state.TurnField(1), state.FirstWrite(`{"turn":1}`)}, "ingress1", false},
		{"completed, request read", nil, state.Completed, []any{"response", json.RawMessage(`{"text":"a"}`)}, "ingress1", false},
		{"failed", nil, state.Failed, []any{"error", &state.JobError{Status: 502, Type: "upstream_error", Code: "c", Message: "it broke"}}, "ingress2", false},
		{"cancelled", request, state.Cancelled, nil, "ingress2", false},
		{"no ingress", request, state.Completed, []any{"response", json.RawMessage(`{}`)}, "", false},
		{"no ingress, no callback", request, state.Completed, []any{"response", json.RawMessage(`{}`)}, "", true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := state.NewID("job_")
			now := time.Now().UTC()
			j := &state.Job{ID: id, Tenant: "t", Kind: "chat", Model: "m", Request: request, Created: now, Deadline: now.Add(time.Minute),
				Question: "hi", Callback: json.RawMessage(`{"url":"https://example.com"}`), Batch: "", Ingress: c.ingress, HasStoredResponse: i%2 == 0}
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
			won, ended, err := s.Jobs.FinishRecord(ctx, id, c.status, c.held, c.fields...)
			if err != nil || !won {
				t.Fatalf("FinishRecord = %v, %v", won, err)
			}
			if c.uncalled && c.ingress == "" {
				if ended != nil {
					t.Fatalf("a job naming no ingress and without a callback was read back: %+v", ended)
				}
				return
			}
			if ended == nil || ended.Ingress != c.ingress {
				t.Fatalf("ended = %+v, want one for %s", ended, c.ingress)
			}
			want, err := s.Jobs.GetJob(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			got, err := state.EndedJob(ended.Record())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(ended.Job(), want) {
				t.Fatalf("handed over %+v\nGetJob reads %+v", got, want)
			}
			if got.Ingress != "" {
				t.Fatalf("the ingress token reached the job record: %q", got.Ingress)
			}
			// A second ending moves nothing and hands nothing over.
			won, ended, err = s.Jobs.FinishRecord(ctx, id, state.Failed, c.held, "error", &state.JobError{Type: "x", Message: "late"})
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
	if err := s.Jobs.CreateJob(ctx, &state.Job{ID: id, Kind: "chat", Ingress: "i"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Chains.SaveTurn(ctx, id, 1, []byte(`{"t":1}`), false, false); err != nil {
		t.Fatal(err)
	}
	won, ended, err := s.Jobs.FinishRecord(ctx, id, state.Completed, nil, state.TurnField(1), state.FirstWrite(`{"t":2}`))
	if !errors.Is(err, state.ErrAnswerStood) || won || ended != nil {
		t.Fatalf("FinishRecord = %v, %+v, %v; want ErrAnswerStood", won, ended, err)
	}
	if st, _ := s.Jobs.JobStatus(ctx, id); st != state.Queued {
		t.Fatalf("status = %s, want queued", st)
	}
}

// A record that is cut short, of another version or of an archived job is refused:
// its ingress reads the job from Redis.
func TestEndedJobRefusesWhatItCannotRead(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	id := state.NewID("job_")
	if err := s.Jobs.CreateJob(ctx, &state.Job{ID: id, Kind: "chat", Ingress: "i", Request: json.RawMessage(`{"a":1}`)}); err != nil {
		t.Fatal(err)
	}
	_, ended, err := s.Jobs.FinishRecord(ctx, id, state.Completed, nil, "response", json.RawMessage(`{"long":"`+string(make([]byte, 300))+`"}`))
	if err != nil || ended == nil {
		t.Fatal(ended, err)
	}
	rec := ended.Record()
	if _, err := state.EndedJob(rec); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"empty":         nil,
		"cut short":     rec[:len(rec)-10],
		"other version": append([]byte{99}, rec[1:]...),
	} {
		if j, err := state.EndedJob(b); err == nil {
			t.Errorf("%s: decoded %+v", name, j)
		}
	}
}

// The ingress a job named is neither archived nor left in Redis once the job is
// archived: it was of use only until the job ended.
func TestArchivingDropsTheIngress(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	b, _ := bustest.New(t)
	ctx := t.Context()
	records, err := bus.OpenRecords(ctx, b, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	s := state.New(rdb, prefix, time.Hour, state.WithArchive(records))
	id := state.NewID("job_")
	if err := s.Jobs.CreateJob(ctx, &state.Job{ID: id, Kind: "chat", Request: json.RawMessage(`{"a":1}`), Ingress: "tok3n"}); err != nil {
		t.Fatal(err)
	}
	if _, ended, err := s.Jobs.FinishRecord(ctx, id, state.Completed, nil, "response", json.RawMessage(`{}`)); err != nil || ended == nil {
		t.Fatal(ended, err)
	}
	if v, _ := rdb.HGet(ctx, s.K.Job(id), "ingress").Result(); v != "tok3n" {
		t.Fatalf("before archiving, ingress = %q", v)
	}
	if _, err := s.Jobs.ArchiveJob(ctx, id); err != nil {
		t.Fatal(err)
	}
	if in, _ := rdb.HExists(ctx, s.K.Job(id), "ingress").Result(); in {
		t.Error("the ingress stayed in Redis")
	}
	rec, err := records.Get(ctx, id)
	if err != nil || len(rec) == 0 {
		t.Fatalf("archived record: %d bytes, %v", len(rec), err)
	}
	if strings.Contains(string(rec), "tok3n") {
		t.Errorf("the archived record names the ingress: %s", rec)
	}
}
