package state_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/chat"
	"github.com/searchfleet/searchfleet/pkg/spend"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// ledgerStore is a spend ledger and result record a test can put jobs in: what the
// chat worker prices turns into (spend.TurnLedger) and answers repeated searches from
// (chat.Records).
type ledgerStore interface {
	spend.TurnLedger
	chat.Records
	CreateJob(ctx context.Context, j *state.Job) error
	SpendOf(ctx context.Context, tenant string, now time.Time) (spend.Spend, error)
	SetBatchCap(ctx context.Context, batchID string, usd float64, ttl time.Duration) error
	BatchSpendOf(ctx context.Context, batchID string) (usd, capUSD float64, err error)
}

// TestLedgerConformance is the conformance suite of spend.TurnLedger and chat.Records:
// a turn is reserved before it is paid and counted once however often it is reserved
// or settled, every budget that refuses it gives back what was held, and a recorded
// result is the first one recorded.
func TestLedgerConformance(t *testing.T) {
	conform(t, func(s flat) ledgerStore { return s }, []conformCase[ledgerStore]{
		{"RequestCapRefusesTurn", requestCapRefusesTurn},
		{"TurnSettledOnce", turnSettledOnce},
		{"TenantBudgetRefusesTurn", tenantBudgetRefusesTurn},
		{"LapsedReservationGivenBack", lapsedReservation},
		{"BatchCapRefusesTurn", batchCapRefusesTurn},
		{"RecordsFirstWriteWins", recordsFirstWriteWins},
	})
}

func ledgerJob(t *testing.T, s ledgerStore, id, tenant, batch string) {
	t.Helper()
	if err := s.CreateJob(context.Background(), &state.Job{ID: id, Tenant: tenant, Batch: batch, Kind: "chat", Model: "m", Request: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
}

func wantRequest(t *testing.T, s ledgerStore, job string, usd, capUSD float64) {
	t.Helper()
	got, c, err := s.RequestSpend(context.Background(), job)
	if err != nil || got != usd || c != capUSD {
		t.Fatalf("job %s ledger $%v cap $%v (%v), want $%v cap $%v", job, got, c, err, usd, capUSD)
	}
}

const turnTTL = time.Minute

func requestCapRefusesTurn(t *testing.T, s ledgerStore) {
	ctx, now := context.Background(), time.Now()
	ledgerJob(t, s, "j", "acme", "")
	wantRequest(t, s, "j", 0, 0)
	if err := s.SetRequestCap(ctx, "j", 0.01); err != nil {
		t.Fatal(err)
	}
	wantRequest(t, s, "j", 0, 0.01)
	for range 2 { // a redelivered step reserves nothing more
		if ex, err := s.ReserveTurn(ctx, "j", "acme", "j:0@model", 0.006, 0, spend.Budget{}, turnTTL, now); ex != nil || err != nil {
			t.Fatalf("a turn within the cap: %+v %v", ex, err)
		}
	}
	wantRequest(t, s, "j", 0.006, 0.01)
	ex, err := s.ReserveTurn(ctx, "j", "acme", "j:1@model", 0.006, 0, spend.Budget{}, turnTTL, now)
	if err != nil || ex == nil || ex.Budget != spend.BudgetRequest || ex.Limit != 0.01 || !ex.Reset.IsZero() {
		t.Fatalf("a turn past the cap: %+v %v", ex, err)
	}
	wantRequest(t, s, "j", 0.006, 0.01)
	wantSpend(t, s, "acme", 0.006, 0)
}

func turnSettledOnce(t *testing.T, s ledgerStore) {
	ctx, now := context.Background(), time.Now()
	ledgerJob(t, s, "j", "acme", "")
	const a, b = "j:0@model", "j:1@model"
	if ex, err := s.ReserveTurn(ctx, "j", "acme", a, 0.01, 1, spend.Budget{}, turnTTL, now); ex != nil || err != nil {
		t.Fatal(ex, err)
	}
	wantSpend(t, s, "acme", 0.01, 1) // the worst case, reserved
	if got, err := s.UnrecordedCalls(ctx, "acme", []string{a, b}, now); err != nil || !slices.Equal(got, []string{a, b}) {
		t.Fatalf("unrecorded %v %v: a reservation is not a record", got, err)
	}
	for i, want := range []bool{true, false} {
		fresh, err := s.SettleTurn(ctx, "j", "acme", a, 0.004, 0, now)
		if err != nil || fresh != want {
			t.Fatalf("settle %d: fresh %v %v, want %v", i, fresh, err, want)
		}
		wantSpend(t, s, "acme", 0.004, 0)
		wantRequest(t, s, "j", 0.004, 0)
	}
	// A turn that was never reserved (its reservation lapsed) is recorded once.
	for i, want := range []bool{true, false} {
		if fresh, err := s.SettleTurn(ctx, "j", "acme", b, 0.002, 1, now); err != nil || fresh != want {
			t.Fatalf("settle unreserved %d: %v %v, want %v", i, fresh, err, want)
		}
	}
	wantSpend(t, s, "acme", 0.006, 1)
	wantRequest(t, s, "j", 0.006, 0)
	if got, err := s.UnrecordedCalls(ctx, "acme", []string{a, b, "j:2@model"}, now); err != nil || !slices.Equal(got, []string{"j:2@model"}) {
		t.Fatalf("unrecorded %v %v", got, err)
	}
	if got, err := s.UnrecordedCalls(ctx, "acme", nil, now); err != nil || len(got) != 0 {
		t.Fatalf("unrecorded of none %v %v", got, err)
	}
}

func tenantBudgetRefusesTurn(t *testing.T, s ledgerStore) {
	ctx, now := context.Background(), time.Now()
	ledgerJob(t, s, "j", "acme", "")
	usd := spend.Budget{USDPerDay: 0.01}
	if ex, err := s.ReserveTurn(ctx, "j", "acme", "j:0@model", 0.008, 0, usd, turnTTL, now); ex != nil || err != nil {
		t.Fatal(ex, err)
	}
	dayEnd, monthEnd := spend.PeriodEnds(now)
	ex, err := s.ReserveTurn(ctx, "j", "acme", "j:1@model", 0.005, 0, usd, turnTTL, now)
	if err != nil || ex == nil || ex.Budget != spend.BudgetUSDDay || ex.Limit != 0.01 || !ex.Reset.Equal(dayEnd) {
		t.Fatalf("a turn past the daily budget: %+v %v", ex, err)
	}
	wantRequest(t, s, "j", 0.008, 0) // the refused turn's hold given back
	wantSpend(t, s, "acme", 0.008, 0)
	month := spend.Budget{USDPerMonth: 0.01}
	if ex, _ := s.ReserveTurn(ctx, "j", "acme", "j:1@model", 0.005, 0, month, turnTTL, now); ex == nil || ex.Budget != spend.BudgetUSDMonth || !ex.Reset.Equal(monthEnd) {
		t.Fatalf("a turn past the monthly budget: %+v", ex)
	}
	// Native searches count against the search budgets; a turn without any does not.
	searches := spend.Budget{SearchesPerDay: 1}
	if ex, _ := s.ReserveTurn(ctx, "j", "acme", "j:2@model", 0.001, 2, searches, turnTTL, now); ex == nil || ex.Budget != spend.BudgetSearchesDay || ex.Limit != 1 {
		t.Fatalf("a turn of two native searches past a budget of one: %+v", ex)
	}
	if ex, err := s.ReserveTurn(ctx, "j", "acme", "j:3@model", 0.001, 0, searches, turnTTL, now); ex != nil || err != nil {
		t.Fatalf("a turn without searches: %+v %v", ex, err)
	}
	wantSpend(t, s, "acme", 0.009, 0)
}

func lapsedReservation(t *testing.T, s ledgerStore) {
	ctx, now := context.Background(), time.Now()
	ledgerJob(t, s, "j", "acme", "")
	// A reservation holds at least a second.
	if ex, err := s.ReserveTurn(ctx, "j", "acme", "j:0@model", 0.01, 1, spend.Budget{}, time.Millisecond, now); ex != nil || err != nil {
		t.Fatal(ex, err)
	}
	time.Sleep(1100 * time.Millisecond)
	if ex, err := s.ReserveTurn(ctx, "j", "acme", "j:1@model", 0.002, 0, spend.Budget{}, turnTTL, now); ex != nil || err != nil {
		t.Fatal(ex, err)
	}
	wantSpend(t, s, "acme", 0.002, 0)
	// Its turn, settled late, is recorded anew.
	if fresh, err := s.SettleTurn(ctx, "j", "acme", "j:0@model", 0.003, 0, now); err != nil || !fresh {
		t.Fatalf("a lapsed turn settled: %v %v", fresh, err)
	}
	wantSpend(t, s, "acme", 0.005, 0)
}

func batchCapRefusesTurn(t *testing.T, s ledgerStore) {
	ctx, now := context.Background(), time.Now()
	ledgerJob(t, s, "a", "acme", "b1")
	ledgerJob(t, s, "b", "acme", "b1")
	if err := s.SetBatchCap(ctx, "b1", 0.01, time.Hour); err != nil {
		t.Fatal(err)
	}
	if ex, err := s.ReserveTurn(ctx, "a", "acme", "a:0@model", 0.008, 0, spend.Budget{}, turnTTL, now); ex != nil || err != nil {
		t.Fatal(ex, err)
	}
	if usd, c, err := s.BatchSpendOf(ctx, "b1"); err != nil || usd != 0.008 || c != 0.01 {
		t.Fatalf("batch ledger $%v cap $%v (%v)", usd, c, err)
	}
	ex, err := s.ReserveTurn(ctx, "b", "acme", "b:0@model", 0.005, 0, spend.Budget{}, turnTTL, now)
	if err != nil || ex == nil || ex.Budget != spend.BudgetBatch || ex.Limit != 0.01 {
		t.Fatalf("a turn past the batch's cap: %+v %v", ex, err)
	}
	wantRequest(t, s, "b", 0, 0)
	if _, err := s.SettleTurn(ctx, "a", "acme", "a:0@model", 0.003, 0, now); err != nil {
		t.Fatal(err)
	}
	if usd, _, _ := s.BatchSpendOf(ctx, "b1"); usd != 0.003 {
		t.Fatalf("batch ledger $%v after settling, want $0.003", usd)
	}
	wantSpend(t, s, "acme", 0.003, 0)
}

func recordsFirstWriteWins(t *testing.T, s ledgerStore) {
	ctx := context.Background()
	ledgerJob(t, s, "j", "acme", "b1")
	ledgerJob(t, s, "k", "acme", "b1")
	ledgerJob(t, s, "solo", "acme", "")
	for _, r := range []string{`{"r":1}`, `{"r":2}`} {
		if err := s.RecordSearch(ctx, "j", "a1", []byte(r)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.RecordedSearches(ctx, "j"); err != nil || len(got) != 1 || string(got["a1"]) != `{"r":1}` {
		t.Fatalf("job's record %q %v, want the first result", got, err)
	}
	found, inBatch, err := s.RecordedSearch(ctx, "k", "b1", []string{"a1", "a2"})
	if err != nil || len(found) != 1 || string(found["a1"]) != `{"r":1}` || !inBatch["a1"] {
		t.Fatalf("batch lookup %q %v %v", found, inBatch, err)
	}
	if err := s.RecordSearch(ctx, "k", "a1", []byte(`{"r":3}`)); err != nil {
		t.Fatal(err)
	}
	found, inBatch, _ = s.RecordedSearch(ctx, "k", "b1", []string{"a1"})
	if string(found["a1"]) != `{"r":3}` || inBatch["a1"] {
		t.Fatalf("the job's own record comes first: %q %v", found, inBatch)
	}
	if err := s.RecordSearch(ctx, "solo", "a9", []byte(`{"r":9}`)); err != nil {
		t.Fatal(err)
	}
	if found, _, _ := s.RecordedSearch(ctx, "k", "b1", []string{"a9"}); len(found) != 0 {
		t.Fatalf("another job's record leaked into the batch's: %q", found)
	}
	if got, err := s.RecordedSearches(ctx, "none"); err != nil || len(got) != 0 {
		t.Fatalf("a job without a record: %q %v", got, err)
	}
	if found, _, err := s.RecordedSearch(ctx, "k", "b1", nil); err != nil || len(found) != 0 {
		t.Fatalf("no addresses: %q %v", found, err)
	}
}
