package state_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/spend"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// On a single Redis a paid start holds its tenant's part in the same script as its
// job's (ReserveHeld then has nothing to do); written as across a cluster's slots it
// holds only the job's. A redelivered start whose job's part an earlier delivery held
// without the tenant's, refused now by the tenant's budget, gives the job's part back.
func TestStartSearchHoldsTheTenantsPartOnOneRedis(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	if _, ok := rdb.(*redis.ClusterClient); ok {
		t.Skip("a single Redis's path: the cluster's is the conformance suite's")
	}
	one := state.New(rdb, prefix, time.Hour)
	cluster := state.AsCluster(state.New(rdb, prefix, time.Hour))
	ctx, now := context.Background(), time.Now()
	if err := one.Jobs.CreateJob(ctx, &state.Job{ID: "j", Tenant: "acme", Kind: "chat", Model: "m", Request: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	budget := spend.Budget{SearchesPerDay: 1}
	pay := func(call string) *state.Pay {
		return &state.Pay{Call: "j:0:" + call + "@brave", Engine: "brave", USD: 0.01, Tenant: "acme", Budget: budget, Now: now}
	}
	st, err := one.Searches.StartSearch(ctx, "j", 0, "c1", "w1", time.Minute, pay("c1"))
	if err != nil || st.Held == nil || st.Held.Tenant == nil || st.Held.Tenant.Tenant != "acme" {
		t.Fatalf("one Redis: %+v %v", st, err)
	}
	st, err = cluster.Searches.StartSearch(ctx, "j", 0, "c2", "w1", time.Minute, pay("c2"))
	if err != nil || st.Held == nil || st.Held.Tenant != nil {
		t.Fatalf("as across a cluster: %+v %v", st, err)
	}
	if usd, _, _ := one.Ledger.RequestSpend(ctx, "j"); usd != 0.02 {
		t.Fatalf("job ledger $%v, want $0.02", usd)
	}
	st, err = one.Searches.StartSearch(ctx, "j", 0, "c2", "w1", time.Minute, pay("c2"))
	if err != nil || st.Held != nil || st.Refused == nil || st.Refused.Budget != spend.BudgetSearchesDay {
		t.Fatalf("the redelivery past the tenant's budget: %+v %v", st, err)
	}
	if usd, _, _ := one.Ledger.RequestSpend(ctx, "j"); usd != 0.01 {
		t.Fatalf("job ledger $%v after the refusal, want $0.01", usd)
	}
	if sp, _ := one.Ledger.SpendOf(ctx, "acme", now); sp.DaySearches != 1 || sp.DayUSD != 0.01 {
		t.Fatalf("tenant spend %+v, want one search of $0.01", sp)
	}
}
