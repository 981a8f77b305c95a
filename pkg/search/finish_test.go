package search_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/search"
)

// A finished search is stored as it is sent: the resume message is the very bytes stored as
// the call's outcome (the chain's result, which the chat worker reads as it reads the
// message), whose result is the very bytes recorded for the job, in the form the
// chain reads (no rendered text: the chat worker renders its own); and the message
// decodes into the call's Done.
func TestFinishedSearchIsStoredAsSent(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	w := r.worker("w1", nil, nil, r.cfgs["brave"])
	req := r.job("job_once", "brave")
	handle(t, w, req, 1)
	ctx := context.Background()

	s, err := r.bus.RawJetStream().Stream(ctx, bus.StreamChat)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(ctx, bus.SubjectResume+".>")
	if err != nil {
		t.Fatal(err)
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(m.Data, &env); err != nil {
		t.Fatalf("the resume message: %v: %s", err, m.Data)
	}
	ss, err := r.store.Searches.StartSearch(ctx, req.JobID, req.Hop, req.CallID, "w2", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Data, ss.Done) {
		t.Errorf("the resume message is\n%s\nthe stored outcome is\n%s", m.Data, ss.Done)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(env.Data, &fields); err != nil {
		t.Fatal(err)
	}
	rec, err := r.store.Searches.RecordedSearches(ctx, req.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if got := rec[search.Address("brave", req.Query)]; !bytes.Equal(got, fields["result"]) {
		t.Errorf("the recorded search is\n%s\nthe outcome's result\n%s", got, fields["result"])
	}

	done, _, err := bus.Decode[search.Done](m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if done.JobID != req.JobID || done.CallID != req.CallID || done.Engine != "brave" || done.Attempts != 1 || done.Worker != "w1" ||
		!search.Complete(&done.Result) || len(done.Result.Citation.Sources) == 0 || done.Result.Citation.LLMContent != "" {
		t.Errorf("the resume message decodes as %+v", done)
	}
}
