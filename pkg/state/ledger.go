package state

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/searchfleet/searchfleet/pkg/spend"
)

// A job's own spend ledger lives in the job's hash (Keys.Job), its fields marked "$":
// "$usd" in micro-dollars (model turns and searches, reservations included), "$cap"
// the request's max_cost_usd, and per paid call "$r:<call>" what it holds (and
// "$d:<call>", a model turn's day), so a redelivered call is never counted twice.
// A reservation then reads the job's batch with its ledger, and the ledger needs no
// TTL of its own. A batch's ledger (Keys.batchSpend) is a hash of its own with the
// same fields unmarked.
const ledgerMark = "$"

// reserveJobCap reserves a call's price against the ledger in its job's hash: one
// HMGET reads the job's batch with the ledger, one HSET writes.
// (lua/reserve_job_cap.lua)
var reserveJobCap = script("reserve_job_cap")

// reserveCap reserves a call's price against a capped ledger. (lua/reserve_cap.lua)
var reserveCap = script("reserve_cap")

// settleCap moves a call's reservation in a ledger (a job's or a batch's, by its
// fields' mark) to its real cost. (lua/settle_cap.lua)
var settleCap = script("settle_cap")

// setSpendCap caps a batch's ledger at usd; setting it again is harmless. ttl is the
// ledger's lifetime.
func (s *core) setSpendCap(ctx context.Context, ledger string, usd float64, ttl time.Duration) error {
	_, err := s.r.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, ledger, "cap", spend.Micros(usd))
		p.PExpire(ctx, ledger, ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("state: setting a spending cap: %w", err)
	}
	return nil
}

// setJobCap caps the ledger in a job's hash, if the job is there (no hash is made
// without its TTL). (lua/set_job_cap.lua)
var setJobCap = script("set_job_cap")

// ledgerSpend reads a ledger's spend and cap (0: none); mark is its fields' mark
// (ledgerMark for a job's, "" for a batch's).
func (s *core) ledgerSpend(ctx context.Context, ledger, mark string) (usd, capUSD float64, err error) {
	v, err := s.r.HMGet(ctx, ledger, mark+"usd", mark+"cap").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, 0, fmt.Errorf("state: reading spend: %w", err)
	}
	num := func(x any) float64 {
		str, _ := x.(string)
		n, _ := strconv.ParseInt(str, 10, 64)
		return spend.USD(n)
	}
	if len(v) == 2 {
		usd, capUSD = num(v[0]), num(v[1])
	}
	return usd, capUSD, nil
}

// Hold is what one paid call holds until it is settled: its job's and batch's
// ledger entries and the tenant's reservation.
type Hold struct {
	JobID  string
	Batch  string
	Call   string
	Tenant *Reservation
	// price is the call's reserved price (micro-dollars); made says which ledgers'
	// entries this hold wrote (not ones an earlier delivery of the call left, which
	// may have been settled to another cost since). Settling an entry this hold wrote
	// to its price (and one search) changes nothing, so SettleCall skips it.
	price int64
	made  struct{ job, batch, tenant bool }
}

// ReserveCall reserves usd for a paid call of job against, in turn, the job's
// ledger (the request's cap), its batch's ledger (the batch's cap) and the tenant's
// budget b. Each step is atomic across workers and reserves a call once, so a
// redelivered call reserves nothing more; a refusal gives back what the earlier steps
// reserved. It returns the hold to settle, or the budget that refused.
func (s *Ledger) ReserveCall(ctx context.Context, jobID, tenant, call string, usd float64, b spend.Budget, now time.Time) (*Hold, *spend.Exhausted, error) {
	price := spend.Micros(usd)
	v, err := reserveJobCap.Run(ctx, s.r, []string{s.K.Job(jobID)}, call, price).Slice()
	if err != nil {
		return nil, nil, fmt.Errorf("state: reserving a request's spend: %w", err)
	}
	answer, batch, limit := capAnswer(v)
	if answer == "over" {
		return nil, &spend.Exhausted{Budget: spend.BudgetRequest, Limit: limit}, nil
	}
	h := &Hold{JobID: jobID, Call: call, price: price}
	h.made.job = answer == "ok"
	if batch != "" {
		h.Batch = batch
		a, ex, err := s.reserveBatch(ctx, batch, h.Call, h.price)
		if err != nil || ex != nil {
			if ex != nil {
				h.Batch = "" // nothing held there
			}
			s.releaseHold(ctx, h)
			return nil, ex, err
		}
		h.made.batch = a == "ok"
	}
	r, ex, err := s.ReserveSpend(ctx, tenant, h.Call, usd, b, now)
	if err != nil || ex != nil {
		s.releaseHold(ctx, h)
		return nil, ex, err
	}
	h.Tenant, h.made.tenant = r, r.made
	return h, nil, nil
}

// reserveBatch reserves a call's price against its batch's ledger: "ok", "again" (an
// earlier delivery's entry), or the batch's cap that refused it.
func (s *Ledger) reserveBatch(ctx context.Context, batch, call string, price int64) (string, *spend.Exhausted, error) {
	v, err := reserveCap.Run(ctx, s.r, []string{s.K.batchSpend(batch)}, call, price, s.Retention.Milliseconds()).Slice()
	if err != nil {
		return "", nil, fmt.Errorf("state: reserving a batch's spend: %w", err)
	}
	a, _, limit := capAnswer(v)
	if a == "over" {
		return a, &spend.Exhausted{Budget: spend.BudgetBatch, Limit: limit}, nil
	}
	return a, nil, nil
}

// capAnswer reads reserveCap's {answer, batch, cap}.
func capAnswer(v []any) (answer, batch string, limit float64) {
	if len(v) == 3 {
		answer, _ = v[0].(string)
		batch, _ = v[1].(string)
		n, _ := v[2].(int64)
		limit = spend.USD(n)
	}
	return answer, batch, limit
}

// releaseHold gives back what a refused call reserved in its job's and batch's
// ledgers (settled to nothing; the entries stay, so a redelivery is still one call).
func (s *core) releaseHold(ctx context.Context, h *Hold) {
	ctx = context.WithoutCancel(ctx)
	settleCap.Run(ctx, s.r, []string{s.K.Job(h.JobID)}, h.Call, 0, ledgerMark)
	if h.Batch != "" {
		settleCap.Run(ctx, s.r, []string{s.K.batchSpend(h.Batch)}, h.Call, 0, "")
	}
}

// SettleCall sets what h's call really cost in every ledger that holds it: usd over
// searches searches (0 and 0 release a call that was not billed). Settling twice to
// the same cost is harmless.
func (s *Ledger) SettleCall(ctx context.Context, h *Hold, usd float64, searches int) error {
	cost := spend.Micros(usd)
	asHeld := cost == h.price
	var errs []error
	if !(asHeld && h.made.job) {
		if err := settleCap.Run(ctx, s.r, []string{s.K.Job(h.JobID)}, h.Call, cost, ledgerMark).Err(); err != nil {
			errs = append(errs, err)
		}
	}
	if h.Batch != "" && !(asHeld && h.made.batch) {
		if err := settleCap.Run(ctx, s.r, []string{s.K.batchSpend(h.Batch)}, h.Call, cost, "").Err(); err != nil {
			errs = append(errs, err)
		}
	}
	if h.Tenant != nil && !(asHeld && searches == 1 && h.made.tenant) {
		if err := s.SettleSpend(ctx, h.Tenant, usd, searches); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("state: settling spend: %w", err)
	}
	return nil
}

// UnrecordedCalls returns those of calls the tenant's ledger of the day has not
// counted, or holds only as a reservation not yet settled (ReserveTurn), in one read:
// a job's completion settles only those, not every turn again.
func (s *Ledger) UnrecordedCalls(ctx context.Context, tenant string, calls []string, now time.Time) ([]string, error) {
	if len(calls) == 0 {
		return nil, nil
	}
	day, _ := periods(now)
	got, err := s.r.HMGet(ctx, s.K.spendCalls(tenant, day), calls...).Result()
	if err != nil {
		return nil, fmt.Errorf("state: reading recorded calls: %w", err)
	}
	var out []string
	for i, v := range got {
		if v == nil || pendingValue(v) {
			out = append(out, calls[i])
		}
	}
	return out, nil
}

// SetRequestCap caps a job's spend at the request's max_cost_usd.
func (s *Ledger) SetRequestCap(ctx context.Context, jobID string, usd float64) error {
	if err := setJobCap.Run(ctx, s.r, []string{s.K.Job(jobID)}, spend.Micros(usd)).Err(); err != nil {
		return fmt.Errorf("state: setting a spending cap: %w", err)
	}
	return nil
}

// RequestSpend reads what a job has spent (model turns and searches, reservations
// included) and its cap (0: none).
func (s *Ledger) RequestSpend(ctx context.Context, jobID string) (usd, capUSD float64, err error) {
	return s.ledgerSpend(ctx, s.K.Job(jobID), ledgerMark)
}

// SetBatchCap caps a batch's spend across all its jobs; ttl is the batch record's.
func (s *Ledger) SetBatchCap(ctx context.Context, batchID string, usd float64, ttl time.Duration) error {
	return s.setSpendCap(ctx, s.K.batchSpend(batchID), usd, ttl)
}

// BatchSpendOf reads what a batch's jobs have spent and its cap (0: none).
func (s *Ledger) BatchSpendOf(ctx context.Context, batchID string) (usd, capUSD float64, err error) {
	return s.ledgerSpend(ctx, s.K.batchSpend(batchID), "")
}
