package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/searchfleet/searchfleet/pkg/spend"
)

// What the web console reads besides the job and batch records: a tenant's recent
// jobs (an index written when a job is created) and its spend per day and model (a
// ledger written when a job ends).

// TenantJobsKept is how many of a tenant's most recent jobs its index keeps; older
// ones drop out of the list (their records stay readable by id until they expire).
const TenantJobsKept = 1000

// ModelSpendDays is how many days the per-model spend ledger keeps.
const ModelSpendDays = 35

// indexJob adds a job a tenant submitted to the tenant's index in p. One submission
// in indexTrimEvery (at random) trims the index to the newest TenantJobsKept, so it
// holds a few more between trims (TenantJobs lists the newest TenantJobsKept alone).
// Entries older than the retention period are not trimmed here: their records have
// expired, and TenantJobs drops such entries as it meets them. The index's TTL, the
// retention plus refreshEvery, is set once a minute by each process (refreshes), not
// with every submission: it outlives every entry all the same. A batch's lines are
// not indexed: a 2,000-line batch would push out everything else, and they are
// reached through their batch. It returns the index's key when it set its TTL.
func (s *core) indexJob(ctx context.Context, p redis.Pipeliner, j *Job, now time.Time) (refreshed string) {
	if j.Batch != "" {
		return ""
	}
	k := s.K.TenantJobs(j.Tenant)
	p.ZAdd(ctx, k, redis.Z{Score: float64(j.Created.UnixMilli()), Member: j.ID})
	if rand.IntN(indexTrimEvery) == 0 {
		p.ZRemRangeByRank(ctx, k, 0, -TenantJobsKept-1)
	}
	if !s.ttls.due(k, now) {
		return ""
	}
	p.PExpire(ctx, k, s.Retention+refreshEvery)
	return k
}

// indexTrimEvery is how many submissions a tenant's job index is trimmed once in, on
// average.
const indexTrimEvery = 16

// TenantJobs returns up to limit of a tenant's jobs, newest first, after the job id
// after ("" from the newest), and whether more follow. Jobs whose records expired are
// dropped from the index as they are met. They are read from Redis alone: an archived
// job comes without its request, answer and trace, its usage holds only its searches
// and cost (GetJob reads the whole record).
func (s *Jobs) TenantJobs(ctx context.Context, tenant, after string, limit int) ([]*Job, bool, error) {
	var out []*Job
	var ids []string
	flush := func() error {
		cmds := make([]*redis.MapStringStringCmd, len(ids))
		_, err := s.r.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range ids {
				cmds[i] = p.HGetAll(ctx, s.K.Job(id))
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("state: reading a tenant's jobs: %w", err)
		}
		var gone []any
		for i, c := range cmds {
			m := c.Val()
			if len(m) == 0 || m["id"] == "" {
				gone = append(gone, ids[i])
				continue
			}
			if j := jobFromHash(m); j.Tenant == tenant {
				if m[fieldCold] != "" {
					// An archived job's question, usage and error.
					if sum := summaryOf(m); sum != "" {
						withSummary(j, sum)
					}
				}
				out = append(out, j)
			}
		}
		if len(gone) > 0 {
			s.r.ZRem(ctx, s.K.TenantJobs(tenant), gone...)
		}
		ids = ids[:0]
		return nil
	}
	for id, err := range s.index(ctx, s.K.TenantJobs(tenant), after, false, TenantJobsKept) {
		if err != nil {
			return nil, false, fmt.Errorf("state: listing a tenant's jobs: %w", err)
		}
		ids = append(ids, id)
		if len(ids) < limit+1-len(out) {
			continue
		}
		if err := flush(); err != nil {
			return nil, false, err
		}
		if len(out) > limit {
			break
		}
	}
	if len(out) <= limit && len(ids) > 0 {
		if err := flush(); err != nil {
			return nil, false, err
		}
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// countSpend marks a job record as counted in the per-model spend ledger and reads,
// the first time, what its spend ledger holds. (lua/count_spend.lua)
var countSpend = script("count_spend")

// RecordModelSpend counts an ended job in its tenant's spend per day (the day it
// ended, UTC) and model: what its spend ledger holds (model turns and searches, of a
// failed job too), else its usage's cost_usd, and its searches. A job is counted at
// most once: its record is marked first (with the ledger read in the same script),
// so a crash between the two writes loses that job's count rather than counting it
// twice. The tenant's budget ledgers, which refuse work, are kept apart and exactly
// (SettleTurn, SettleCall). With an archive, ArchiveJob counts the job instead, when
// it trims the record (a step that happens once, and reads the ledger as it drops
// it): on a single Redis in the trim's own script, exactly once; across a cluster's
// slots right after it, at most once. This hook then does nothing.
func (s *Ledger) RecordModelSpend(ctx context.Context, j *Job) error {
	if !j.Status.Terminal() || s.archive != nil {
		return nil
	}
	v, err := countSpend.Run(ctx, s.r, []string{s.K.Job(j.ID)}).Int64Slice()
	if err != nil {
		return fmt.Errorf("state: marking a job's spend: %w", err)
	}
	if len(v) != 2 || v[0] != 1 {
		return nil
	}
	return s.countModelSpend(ctx, s.modelSpendOf(j), v[1])
}

// modelSpend is what an ended job adds to its tenant's spend per day and model: the
// day's hash (key) and the fields of its model, the job's searches and its usage's
// cost_usd in micro-dollars (counted when its spend ledger held nothing).
type modelSpend struct {
	key                      string
	usd, jobs, searchesField string
	searches, usageMicros    int64
}

// modelSpendOf reads what j adds to its tenant's spend per model (RecordModelSpend).
func (s *core) modelSpendOf(j *Job) modelSpend {
	var u struct {
		Searches int     `json:"searches"`
		CostUSD  float64 `json:"cost_usd"`
	}
	if len(j.Usage) > 0 {
		json.Unmarshal(j.Usage, &u)
	}
	at := j.Finished
	if at.IsZero() {
		at = time.Now()
	}
	day, _ := periods(at)
	model := spendModel(j)
	return modelSpend{
		key: s.K.ModelSpendDay(j.Tenant, day),
		usd: "usd:" + model, jobs: "jobs:" + model, searchesField: "searches:" + model,
		searches: int64(u.Searches), usageMicros: spend.Micros(u.CostUSD),
	}
}

// modelSpendOfHash is modelSpendOf for the job whose hash holds m, reading only the
// fields it needs.
func (s *core) modelSpendOfHash(m map[string]string) modelSpend {
	j := Job{Tenant: m["tenant"], Kind: m["kind"], Model: m["model"], Finished: FromMillis(m["finished"])}
	if u := m["usage"]; u != "" {
		j.Usage = []byte(u)
	}
	return s.modelSpendOf(&j)
}

// modelSpendTTL is the lifetime a day's spend per model is given.
const modelSpendTTL = ModelSpendDays*24*time.Hour + refreshEvery

// countModelSpendScript adds an ended job to its tenant's spend per model of a day.
// (lua/count_model_spend.lua)
var countModelSpendScript = script("count_model_spend")

// modelSpendArgs is how many arguments modelSpend.args gives.
const modelSpendArgs = 6

// args are what count_model_spend.lua reads of ms (its ARGV[2..7]): with expire, the day's TTL.
func (ms modelSpend) args(expire bool) []any {
	ttl := int64(0)
	if expire {
		ttl = int64(modelSpendTTL / time.Second)
	}
	return []any{ms.usd, ms.jobs, ms.searchesField, ms.searches, ms.usageMicros, ttl}
}

// countModelSpend adds an ended job, whose spend ledger held micros micro-dollars, to
// its tenant's spend per day and model (see RecordModelSpend) in a script of its own
// (one slot: the day's key). The caller makes sure it is counted once.
func (s *core) countModelSpend(ctx context.Context, ms modelSpend, micros int64) error {
	// The day's ledger gets its TTL once a minute per process (refreshes), not with
	// every job.
	expire := s.ttls.due(ms.key, time.Now())
	argv := append([]any{micros}, ms.args(expire)...)
	if err := countModelSpendScript.Run(ctx, s.r, []string{ms.key}, argv...).Err(); err != nil {
		if expire {
			s.ttls.forget(ms.key)
		}
		return fmt.Errorf("state: recording spend per model: %w", err)
	}
	return nil
}

// spendModel is the name a job's spend is counted under: its model, or "(search)" for
// a direct search, which has none.
func spendModel(j *Job) string {
	if j.Model != "" {
		return j.Model
	}
	if j.Kind == "search" {
		return "(search)"
	}
	return "(none)"
}

// ModelDaySpend is what a tenant's jobs of one model that ended in one UTC day spent.
type ModelDaySpend struct {
	Day      string  `json:"day"` // "2026-11-24"
	Model    string  `json:"model"`
	USD      float64 `json:"spent_usd"`
	Jobs     int64   `json:"jobs"`
	Searches int64   `json:"searches"`
}

// ModelSpend returns a tenant's spend per day and model for the days UTC days up to
// and including now's (1..ModelSpendDays), newest day first, models by name.
func (s *Ledger) ModelSpend(ctx context.Context, tenant string, days int, now time.Time) ([]ModelDaySpend, error) {
	if days < 1 || days > ModelSpendDays {
		return nil, errors.New("state: days out of range")
	}
	now = now.UTC()
	cmds := make([]*redis.MapStringStringCmd, days)
	_, err := s.r.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range days {
			day, _ := periods(now.AddDate(0, 0, -i))
			cmds[i] = p.HGetAll(ctx, s.K.ModelSpendDay(tenant, day))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("state: reading spend per model: %w", err)
	}
	var out []ModelDaySpend
	for i, c := range cmds {
		day := now.AddDate(0, 0, -i).Format(time.DateOnly)
		byModel := map[string]*ModelDaySpend{}
		for f, v := range c.Val() {
			kind, model, ok := strings.Cut(f, ":")
			if !ok {
				continue
			}
			n, _ := strconv.ParseInt(v, 10, 64)
			m := byModel[model]
			if m == nil {
				m = &ModelDaySpend{Day: day, Model: model}
				byModel[model] = m
			}
			switch kind {
			case "usd":
				m.USD = spend.USD(n)
			case "jobs":
				m.Jobs = n
			case "searches":
				m.Searches = n
			}
		}
		start := len(out)
		for _, m := range byModel {
			out = append(out, *m)
		}
		sort.Slice(out[start:], func(a, b int) bool { return out[start+a].Model < out[start+b].Model })
	}
	return out, nil
}
