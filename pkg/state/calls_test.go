package state_test

import (
	"context"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// A job's recorded results are found by address in its own record and, for a job of a
// batch, by the batch's other jobs; the first result recorded under an address stays;
// a job without a batch shares nothing; the replay link is kept with the job.
func TestSearchRecords(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	for _, j := range []*state.Job{{ID: "a1", Kind: "chat", Batch: "b"}, {ID: "a2", Kind: "chat", Batch: "b"}, {ID: "solo", Kind: "chat", ReplayOf: "a1"}} {
		if err := s.Jobs.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := s.Jobs.GetJob(ctx, "solo"); got.ReplayOf != "a1" {
		t.Errorf("replay_of = %q", got.ReplayOf)
	}
	if err := s.Searches.RecordSearch(ctx, "a1", "x", []byte(`first`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Searches.RecordSearch(ctx, "a1", "x", []byte(`second`)); err != nil {
		t.Fatal(err)
	}
	all, err := s.Searches.RecordedSearches(ctx, "a1")
	if err != nil || len(all) != 1 || string(all["x"]) != "first" {
		t.Fatalf("a1's record = %q, %v", all, err)
	}
	found, inBatch, err := s.Searches.RecordedSearch(ctx, "a2", "b", []string{"x", "y"})
	if err != nil || string(found["x"]) != "first" || !inBatch["x"] || found["y"] != nil {
		t.Fatalf("a2 in batch b: %q %v %v", found, inBatch, err)
	}
	found, inBatch, _ = s.Searches.RecordedSearch(ctx, "a1", "b", []string{"x"})
	if string(found["x"]) != "first" || inBatch["x"] {
		t.Errorf("a1 finds its own record first: %q %v", found, inBatch)
	}
	if found, _, _ := s.Searches.RecordedSearch(ctx, "solo", "", []string{"x"}); len(found) != 0 {
		t.Errorf("a job outside the batch found %q", found)
	}
	if all, _ := s.Searches.RecordedSearches(ctx, "solo"); len(all) != 0 {
		t.Errorf("solo's record = %q", all)
	}
}
