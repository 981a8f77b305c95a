package state_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// A tenant's job list holds its own submitted jobs, newest first, paged by limit and
// after; another tenant's jobs, a batch's lines and expired records are not in it.
func TestTenantJobs(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	s := state.New(rdb, prefix, time.Hour)
	ctx := context.Background()
	base := time.Now().Add(-time.Minute).UTC()
	create := func(id, tenant, batch string, i int) {
		t.Helper()
		j := &state.Job{ID: id, Tenant: tenant, Kind: "chat", Model: "m", Batch: batch, Created: base.Add(time.Duration(i) * time.Second)}
		if err := s.Jobs.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		create(fmt.Sprintf("job_a%d", i), "acme", "", i)
	}
	create("job_b0", "globex", "", 10)
	create("job_line0", "acme", "batch_x", 11)

	ids := func(js []*state.Job) (out []string) {
		for _, j := range js {
			out = append(out, j.ID)
		}
		return out
	}
	page, more, err := s.Jobs.TenantJobs(ctx, "acme", "", 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(ids(page)); got != "[job_a4 job_a3]" || !more {
		t.Fatalf("first page = %s more=%v, want [job_a4 job_a3] more=true", got, more)
	}
	page, more, _ = s.Jobs.TenantJobs(ctx, "acme", "job_a3", 10)
	if got := fmt.Sprint(ids(page)); got != "[job_a2 job_a1 job_a0]" || more {
		t.Fatalf("second page = %s more=%v, want [job_a2 job_a1 job_a0] more=false", got, more)
	}
	page, _, _ = s.Jobs.TenantJobs(ctx, "globex", "", 10)
	if got := fmt.Sprint(ids(page)); got != "[job_b0]" {
		t.Fatalf("globex sees %s, want only its own job", got)
	}

	// An expired record is skipped and the page still fills from older jobs.
	if err := rdb.Del(ctx, s.K.Job("job_a3")).Err(); err != nil {
		t.Fatal(err)
	}
	page, more, _ = s.Jobs.TenantJobs(ctx, "acme", "", 2)
	if got := fmt.Sprint(ids(page)); got != "[job_a4 job_a2]" || !more {
		t.Fatalf("after expiry = %s more=%v, want [job_a4 job_a2] more=true", got, more)
	}
	page, _, _ = s.Jobs.TenantJobs(ctx, "acme", "", 10)
	if len(page) != 4 {
		t.Fatalf("acme has %d jobs listed, want 4", len(page))
	}
}

// The index keeps only the newest TenantJobsKept jobs of a tenant.
func TestTenantJobsBounded(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	base := time.Now().Add(-time.Hour).UTC()
	for i := range state.TenantJobsKept + 5 {
		j := &state.Job{ID: fmt.Sprintf("job_%05d", i), Tenant: "acme", Kind: "chat", Created: base.Add(time.Duration(i) * time.Millisecond)}
		if err := s.Jobs.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	after := ""
	for {
		page, more, err := s.Jobs.TenantJobs(ctx, "acme", after, 100)
		if err != nil {
			t.Fatal(err)
		}
		n += len(page)
		if !more {
			if last := page[len(page)-1].ID; last != "job_00005" {
				t.Fatalf("oldest listed = %s, want job_00005", last)
			}
			break
		}
		after = page[len(page)-1].ID
	}
	if n != state.TenantJobsKept {
		t.Fatalf("listed %d jobs, want %d", n, state.TenantJobsKept)
	}
}

// An ended job is counted once in its tenant's spend of its day and model, from its
// spend ledger (a failed job's too), however often the finish hook runs.
func TestModelSpend(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	s := state.New(rdb, prefix, time.Hour)
	ctx := context.Background()
	now := time.Now().UTC()
	yesterday := now.AddDate(0, 0, -1)
	create := func(id, tenant, model string, created time.Time) {
		t.Helper()
		if err := s.Jobs.CreateJob(ctx, &state.Job{ID: id, Tenant: tenant, Kind: "chat", Model: model, Created: created}); err != nil {
			t.Fatal(err)
		}
	}
	end := func(id, tenant, model string, status state.Status, usage string, finished time.Time) *state.Job {
		t.Helper()
		if _, err := s.Jobs.GetJob(ctx, id); err != nil {
			create(id, tenant, model, finished)
		}
		if ok, err := s.Jobs.Update(ctx, id, status, "usage", json.RawMessage(usage)); !ok || err != nil {
			t.Fatalf("ending %s: %v %v", id, ok, err)
		}
		got, _ := s.Jobs.GetJob(ctx, id)
		got.Finished = finished
		return got
	}
	jobs := []*state.Job{
		end("job_1", "acme", "gpt", state.Completed, `{"searches":2,"cost_usd":0.07}`, now),
		end("job_2", "acme", "gpt", state.Completed, `{"searches":1,"cost_usd":0.035}`, now),
		end("job_3", "acme", "claude", state.Completed, `{"searches":1,"cost_usd":0.01}`, yesterday),
		end("job_4", "globex", "gpt", state.Completed, `{"searches":9,"cost_usd":9}`, now),
	}
	// A failed job has no usage, but its ledger holds what its searches cost.
	create("job_5", "acme", "claude", now)
	if _, err := s.Ledger.SettleTurn(ctx, "job_5", "acme", "job_5:0@model", 0.5, 0, now); err != nil {
		t.Fatal(err)
	}
	jobs = append(jobs, end("job_5", "acme", "claude", state.Failed, `null`, now))
	// A job that spent nothing and searched nothing counts as a job all the same.
	jobs = append(jobs, end("job_6", "acme", "free", state.Completed, `{"searches":0,"cost_usd":0}`, now))
	for range 3 { // the finish hook runs again on a redelivered terminal event
		for _, j := range jobs {
			if err := s.Ledger.RecordModelSpend(ctx, j); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := s.Ledger.ModelSpend(ctx, "acme", 2, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []state.ModelDaySpend{
		{Day: now.Format(time.DateOnly), Model: "claude", USD: 0.5, Jobs: 1},
		{Day: now.Format(time.DateOnly), Model: "free", Jobs: 1},
		{Day: now.Format(time.DateOnly), Model: "gpt", USD: 0.105, Jobs: 2, Searches: 3},
		{Day: yesterday.Format(time.DateOnly), Model: "claude", USD: 0.01, Jobs: 1, Searches: 1},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("acme spend =\n %v\nwant\n %v", got, want)
	}
	// A count of 0 is not written (ModelSpend reads a missing field as 0).
	day, _ := rdb.HGetAll(ctx, s.K.ModelSpendDay("acme", now.Format("20060102"))).Result()
	for _, f := range []string{"usd:free", "searches:free", "searches:claude"} {
		if v, ok := day[f]; ok {
			t.Errorf("the day's ledger holds %s = %q", f, v)
		}
	}
	if _, err := s.Ledger.ModelSpend(ctx, "acme", state.ModelSpendDays+1, now); err == nil {
		t.Fatal("a range past ModelSpendDays was accepted")
	}
}
