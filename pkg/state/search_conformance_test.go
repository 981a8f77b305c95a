package state_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/search"
	"github.com/searchfleet/searchfleet/pkg/spend"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// searchStore is a search store a test can put jobs in and read spend from.
type searchStore interface {
	search.Store
	engines.Cooldowns
	CreateJob(ctx context.Context, j *state.Job) error
	SpendOf(ctx context.Context, tenant string, now time.Time) (spend.Spend, error)
	SetRequestCap(ctx context.Context, jobID string, usd float64) error
	RequestSpend(ctx context.Context, jobID string) (usd, capUSD float64, err error)
	SetBatchCap(ctx context.Context, batchID string, usd float64, ttl time.Duration) error
	BatchSpendOf(ctx context.Context, batchID string) (usd, capUSD float64, err error)
	RecordedSearch(ctx context.Context, jobID, batchID string, addrs []string) (found map[string][]byte, inBatch map[string]bool, err error)
}

// TestSearchStoreConformance is the conformance suite of the search workers' store
// (search.Store, search.Calls, and the engines' key cooldowns).
func TestSearchStoreConformance(t *testing.T) {
	conform(t, func(s flat) searchStore { return s }, []conformCase[searchStore]{
		{"StartReadsJob", startReadsJob},
		{"LeaseClaimedKeptReleased", leaseClaimedKeptReleased},
		{"OutcomeStored", outcomeStored},
		{"HandOffFirstWins", handOffFirstWins},
		{"CachePerTenantWithTTL", cachePerTenant},
		{"RateLimitShared", rateLimit},
		{"ReserveCallOnceAndSettle", reserveCallOnce},
		{"CapsRefuseCalls", capsRefuseCalls},
		{"KeyCooldowns", keyCooldowns},
	})
}

func searchJob(t *testing.T, s searchStore, id, tenant, batch string) {
	t.Helper()
	if err := s.CreateJob(context.Background(), &state.Job{ID: id, Tenant: tenant, Batch: batch, Kind: "chat", Model: "m", Request: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
}

func startSearch(t *testing.T, s searchStore, id, call, owner string, ttl time.Duration) *state.SearchStart {
	t.Helper()
	st, err := s.StartSearch(context.Background(), id, 0, call, owner, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func startReadsJob(t *testing.T, s searchStore) {
	if st := startSearch(t, s, "none", "c1", "w1", time.Minute); st.Status != "" || st.Done != nil || st.Fallback != nil {
		t.Fatalf("a job that does not exist: %+v", st)
	}
	searchJob(t, s, "j", "acme", "")
	st := startSearch(t, s, "j", "c1", "w1", time.Minute)
	if st.Status != state.Queued || st.Tenant != "acme" || !st.Claimed || st.Left != 0 || st.Done != nil || st.Fallback != nil {
		t.Fatalf("a new call of a queued job: %+v", st)
	}
}

func leaseClaimedKeptReleased(t *testing.T, s searchStore) {
	ctx := context.Background()
	searchJob(t, s, "j", "acme", "")
	// A claim whose lapse is not under test holds for a minute, so a busy machine that
	// pauses the test between two steps does not let it lapse; a kept lease renews
	// every third of keepTTL; a lease let go lapses within lapseTTL.
	const hold, keepTTL, lapseTTL = time.Minute, 1500 * time.Millisecond, 300 * time.Millisecond
	if !startSearch(t, s, "j", "c1", "w1", hold).Claimed {
		t.Fatal("the first claim failed")
	}
	if st := startSearch(t, s, "j", "c1", "w2", hold); st.Claimed || st.Left <= 0 || st.Left > hold {
		t.Fatalf("a second worker claimed a held call: %+v", st)
	}
	if !startSearch(t, s, "j", "c1", "w1", keepTTL).Claimed {
		t.Fatal("the holder's claim is not renewed")
	}
	if !startSearch(t, s, "j", "c2", "w2", hold).Claimed {
		t.Fatal("another call's lease is apart")
	}
	keep := s.KeepSearch("j", 0, "c1", "w1", keepTTL)
	time.Sleep(keepTTL + 300*time.Millisecond)
	if startSearch(t, s, "j", "c1", "w2", hold).Claimed {
		t.Fatal("a kept lease lapsed")
	}
	keep(true)
	if !startSearch(t, s, "j", "c1", "w2", hold).Claimed {
		t.Fatal("a dropped lease still holds")
	}
	if err := s.ReleaseSearch(ctx, "j", 0, "c1", "w1"); err != nil {
		t.Fatal(err)
	}
	if startSearch(t, s, "j", "c1", "w3", hold).Claimed {
		t.Fatal("a worker released a lease it does not hold")
	}
	if err := s.ReleaseSearch(ctx, "j", 0, "c1", "w2"); err != nil {
		t.Fatal(err)
	}
	if !startSearch(t, s, "j", "c1", "w3", lapseTTL).Claimed {
		t.Fatal("a released lease still holds")
	}
	// A lease kept and then let go lapses on its own, within its ttl.
	s.KeepSearch("j", 0, "c1", "w3", lapseTTL)(false)
	time.Sleep(lapseTTL + 100*time.Millisecond)
	if !startSearch(t, s, "j", "c1", "w4", lapseTTL).Claimed {
		t.Fatal("a lease let go did not lapse")
	}
}

// An outcome is stored for its call; the result recorded with it is recorded under
// its address in the job's record and its batch's, the first one staying.
func outcomeStored(t *testing.T, s searchStore) {
	ctx := context.Background()
	searchJob(t, s, "j", "acme", "")
	if err := s.SaveSearchDone(ctx, "j", 0, "c1", []byte(`{"done":1}`), nil); err != nil {
		t.Fatal(err)
	}
	if st := startSearch(t, s, "j", "c1", "w1", time.Minute); string(st.Done) != `{"done":1}` {
		t.Fatalf("stored outcome %q", st.Done)
	}
	if st := startSearch(t, s, "j", "c2", "w1", time.Minute); st.Done != nil {
		t.Fatalf("another call's outcome: %q", st.Done)
	}
	// A chain's call stores its outcome as its chain's result: the first one stays,
	// and StartSearch returns it.
	for _, b := range []string{`{"done":4}`, `{"done":5}`} {
		if err := s.SaveSearchResult(ctx, "j", 0, "c3", []byte(b), nil); err != nil {
			t.Fatal(err)
		}
	}
	if st := startSearch(t, s, "j", "c3", "w1", time.Minute); string(st.Done) != `{"done":4}` {
		t.Fatalf("stored result %q, want the first", st.Done)
	}
	// A job that is gone gets nothing stored.
	if err := s.SaveSearchResult(ctx, "gone", 0, "c1", []byte(`{}`), nil); err != nil {
		t.Fatal(err)
	}
	if st := startSearch(t, s, "gone", "c1", "w1", time.Minute); st.Done != nil || st.Status != "" {
		t.Fatalf("a job that is gone: %+v", st)
	}
	searchJob(t, s, "k", "acme", "b1")
	startSearch(t, s, "k", "c1", "w1", time.Minute) // the worker meets the job (and its batch) first
	if err := s.SaveSearchDone(ctx, "k", 0, "c1", []byte(`{"done":2}`), &state.Recording{Addr: "a1", Result: []byte(`{"r":1}`)}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveSearchDone(ctx, "k", 0, "c2", []byte(`{"done":3}`), &state.Recording{Addr: "a1", Result: []byte(`{"r":2}`)}); err != nil {
		t.Fatal(err)
	}
	if st := startSearch(t, s, "k", "c2", "w1", time.Minute); string(st.Done) != `{"done":3}` {
		t.Fatalf("stored outcome %q", st.Done)
	}
	found, inBatch, err := s.RecordedSearch(ctx, "k", "b1", []string{"a1"})
	if err != nil || string(found["a1"]) != `{"r":1}` || inBatch["a1"] {
		t.Fatalf("recorded %q (in batch only: %v), %v; want the first result, in the job's record", found, inBatch, err)
	}
	found, inBatch, _ = s.RecordedSearch(ctx, "other", "b1", []string{"a1"})
	if string(found["a1"]) != `{"r":1}` || !inBatch["a1"] {
		t.Fatalf("batch's record %q (%v), want the first result", found, inBatch)
	}
}

func handOffFirstWins(t *testing.T, s searchStore) {
	ctx := context.Background()
	searchJob(t, s, "j", "acme", "")
	fb, err := s.HandOff(ctx, "j", 0, "c1", "brave", "tavily", []byte(`[1]`))
	if err != nil || fb.Engine != "tavily" || string(fb.Tried) != `[1]` {
		t.Fatalf("first hand-off %+v %v", fb, err)
	}
	// A redelivery of brave's message racing the first hand-off gets it.
	if fb, _ := s.HandOff(ctx, "j", 0, "c1", "brave", "exa", []byte(`[2]`)); fb.Engine != "tavily" || string(fb.Tried) != `[1]` {
		t.Fatalf("second hand-off from brave %+v", fb)
	}
	if st := startSearch(t, s, "j", "c1", "w1", time.Minute); st.Fallback == nil || st.Fallback.Engine != "tavily" || string(st.Fallback.Tried) != `[1]` {
		t.Fatalf("start after a hand-off %+v", st.Fallback)
	}
	if fb, _ := s.HandOff(ctx, "j", 0, "c1", "tavily", "exa", []byte(`[1,2]`)); fb.Engine != "exa" || string(fb.Tried) != `[1,2]` {
		t.Fatalf("tavily's hand-off %+v", fb)
	}
}

func cachePerTenant(t *testing.T, s searchStore) {
	ctx := context.Background()
	if _, err := s.CachedSearch(ctx, "acme", "brave", "q1"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("nothing cached: %v", err)
	}
	if err := s.CacheSearch(ctx, "acme", "brave", "q1", []byte(`{"r":1}`), time.Hour); err != nil {
		t.Fatal(err)
	}
	if b, err := s.CachedSearch(ctx, "acme", "brave", "q1"); err != nil || string(b) != `{"r":1}` {
		t.Fatalf("cached %q %v", b, err)
	}
	for _, k := range [][2]string{{"other", "brave"}, {"acme", "tavily"}} {
		if _, err := s.CachedSearch(ctx, k[0], k[1], "q1"); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("tenant %s engine %s read acme's brave cache: %v", k[0], k[1], err)
		}
	}
	if err := s.CacheSearch(ctx, "acme", "brave", "q2", []byte(`{"r":2}`), 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(250 * time.Millisecond)
	if _, err := s.CachedSearch(ctx, "acme", "brave", "q2"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("an expired entry: %v", err)
	}
}

func rateLimit(t *testing.T, s searchStore) {
	ctx := context.Background()
	for range 5 {
		if d, err := s.Allow(ctx, "free", 0, 0); d != 0 || err != nil {
			t.Fatalf("no limit: %v %v", d, err)
		}
	}
	for i := range 2 { // the burst
		if d, err := s.Allow(ctx, "brave", 2, 2); d != 0 || err != nil {
			t.Fatalf("request %d of the burst waits %v (%v)", i, d, err)
		}
	}
	d, err := s.Allow(ctx, "brave", 2, 2)
	if err != nil || d <= 0 || d > 500*time.Millisecond {
		t.Fatalf("past the burst: wait %v (%v), want (0, 500ms]", d, err)
	}
	if d, _ := s.Allow(ctx, "tavily", 2, 1); d != 0 {
		t.Fatalf("another engine's limit is apart: %v", d)
	}
	time.Sleep(d + 20*time.Millisecond)
	if d, _ := s.Allow(ctx, "brave", 2, 2); d != 0 {
		t.Fatalf("after the wait it said: %v", d)
	}
}

func reserveCallOnce(t *testing.T, s searchStore) {
	ctx, now := context.Background(), time.Now()
	searchJob(t, s, "j", "acme", "")
	b := spend.Budget{SearchesPerDay: 2}
	var h1 *state.Hold
	for range 2 { // a redelivered search holds nothing more
		h, ex, err := s.ReserveCall(ctx, "j", "acme", "j:0:c1@brave", 0.01, b, now)
		if err != nil || ex != nil || h == nil || h.JobID != "j" || h.Call != "j:0:c1@brave" || h.Tenant == nil || h.Tenant.Tenant != "acme" {
			t.Fatalf("reserve %+v %+v %v", h, ex, err)
		}
		h1 = h
	}
	wantSpend(t, s, "acme", 0.01, 1)
	h2, ex, err := s.ReserveCall(ctx, "j", "acme", "j:0:c2@brave", 0.01, b, now)
	if err != nil || ex != nil {
		t.Fatal(ex, err)
	}
	dayEnd, _ := spend.PeriodEnds(now)
	_, ex, err = s.ReserveCall(ctx, "j", "acme", "j:0:c3@brave", 0.01, b, now)
	if err != nil || ex == nil || ex.Budget != spend.BudgetSearchesDay || ex.Limit != 2 || !ex.Reset.Equal(dayEnd) {
		t.Fatalf("a third search on a budget of two: %+v %v", ex, err)
	}
	wantSpend(t, s, "acme", 0.02, 2)
	if usd, _, _ := s.RequestSpend(ctx, "j"); usd != 0.02 {
		t.Fatalf("job ledger $%v after a refusal, want $0.02", usd)
	}
	for range 2 { // settling twice to the same cost is harmless
		if err := s.SettleCall(ctx, h1, 0.004, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SettleCall(ctx, h2, 0, 0); err != nil { // a failed search is not billed
		t.Fatal(err)
	}
	wantSpend(t, s, "acme", 0.004, 1)
	if usd, _, _ := s.RequestSpend(ctx, "j"); usd != 0.004 {
		t.Fatalf("job ledger $%v after settling, want $0.004", usd)
	}
	usd := spend.Budget{USDPerDay: 0.005}
	if _, ex, _ := s.ReserveCall(ctx, "j", "acme", "j:1:c1@brave", 0.002, usd, now); ex == nil || ex.Budget != spend.BudgetUSDDay || ex.Limit != 0.005 {
		t.Fatalf("past the daily dollars: %+v", ex)
	}
	if _, ex, _ := s.ReserveCall(ctx, "j", "acme", "j:1:c1@brave", 0.002, spend.Budget{SearchesPerMonth: 1}, now); ex == nil || ex.Budget != spend.BudgetSearchesMonth {
		t.Fatalf("past the monthly searches: %+v", ex)
	}
	if _, ex, _ := s.ReserveCall(ctx, "j", "acme", "j:1:c1@brave", 0.002, spend.Budget{USDPerMonth: 0.005}, now); ex == nil || ex.Budget != spend.BudgetUSDMonth {
		t.Fatalf("past the monthly dollars: %+v", ex)
	}
	wantSpend(t, s, "acme", 0.004, 1)
}

func capsRefuseCalls(t *testing.T, s searchStore) {
	ctx, now := context.Background(), time.Now()
	searchJob(t, s, "j", "acme", "")
	if err := s.SetRequestCap(ctx, "j", 0.015); err != nil {
		t.Fatal(err)
	}
	if _, ex, err := s.ReserveCall(ctx, "j", "acme", "c1", 0.01, spend.Budget{}, now); ex != nil || err != nil {
		t.Fatal(ex, err)
	}
	_, ex, err := s.ReserveCall(ctx, "j", "acme", "c2", 0.01, spend.Budget{}, now)
	if err != nil || ex == nil || ex.Budget != spend.BudgetRequest || ex.Limit != 0.015 {
		t.Fatalf("past the request's cap: %+v %v", ex, err)
	}
	wantSpend(t, s, "acme", 0.01, 1)

	searchJob(t, s, "a", "acme", "b1")
	searchJob(t, s, "b", "acme", "b1")
	if err := s.SetBatchCap(ctx, "b1", 0.015, time.Hour); err != nil {
		t.Fatal(err)
	}
	h, ex, err := s.ReserveCall(ctx, "a", "acme", "a1", 0.01, spend.Budget{}, now)
	if err != nil || ex != nil || h.Batch != "b1" {
		t.Fatalf("a batch job's search %+v %+v %v", h, ex, err)
	}
	_, ex, err = s.ReserveCall(ctx, "b", "acme", "b1", 0.01, spend.Budget{}, now)
	if err != nil || ex == nil || ex.Budget != spend.BudgetBatch || ex.Limit != 0.015 {
		t.Fatalf("past the batch's cap: %+v %v", ex, err)
	}
	if usd, _, _ := s.RequestSpend(ctx, "b"); usd != 0 {
		t.Fatalf("the refused job's ledger keeps $%v", usd)
	}
	if err := s.SettleCall(ctx, h, 0.003, 1); err != nil {
		t.Fatal(err)
	}
	if usd, c, _ := s.BatchSpendOf(ctx, "b1"); usd != 0.003 || c != 0.015 {
		t.Fatalf("batch ledger $%v cap $%v", usd, c)
	}
	wantSpend(t, s, "acme", 0.013, 2)
}

func keyCooldowns(t *testing.T, s searchStore) {
	ctx := context.Background()
	rests, err := s.Resting(ctx, "brave", []string{"fp1", "fp2"})
	if err != nil || len(rests) != 2 || rests[0] != (engines.Rest{}) || rests[1] != (engines.Rest{}) {
		t.Fatalf("no key rests: %+v %v", rests, err)
	}
	if was, err := s.CoolDown(ctx, "brave", "fp1", engines.RateLimited, time.Minute); err != nil || !was {
		t.Fatalf("first cooldown: %v %v", was, err)
	}
	if was, _ := s.CoolDown(ctx, "brave", "fp1", engines.Auth, time.Second); was {
		t.Fatal("a resting key was reported usable")
	}
	rests, _ = s.Resting(ctx, "brave", []string{"fp1", "fp2"})
	if rests[0].Reason != engines.RateLimited || rests[0].Left < 50*time.Second || rests[0].Left > time.Minute || rests[1] != (engines.Rest{}) {
		t.Fatalf("a longer rest was shortened, or spread: %+v", rests)
	}
	if rests, _ := s.Resting(ctx, "tavily", []string{"fp1"}); rests[0] != (engines.Rest{}) {
		t.Fatalf("another engine's key of the same fingerprint rests: %+v", rests)
	}
	if was, _ := s.CoolDown(ctx, "brave", "fp2", engines.Unavailable, 100*time.Millisecond); !was {
		t.Fatal("fp2 was usable")
	}
	if was, _ := s.CoolDown(ctx, "brave", "fp2", engines.Quota, time.Hour); was {
		t.Fatal("fp2 was resting")
	}
	rests, _ = s.Resting(ctx, "brave", []string{"fp2"})
	if rests[0].Reason != engines.Quota || rests[0].Left < 59*time.Minute {
		t.Fatalf("a longer rest replaces a shorter one: %+v", rests)
	}
	if was, _ := s.CoolDown(ctx, "brave", "fp3", engines.Unavailable, 100*time.Millisecond); !was {
		t.Fatal("fp3 was usable")
	}
	time.Sleep(250 * time.Millisecond)
	if rests, _ := s.Resting(ctx, "brave", []string{"fp3"}); rests[0] != (engines.Rest{}) {
		t.Fatalf("a lapsed rest: %+v", rests)
	}
}
