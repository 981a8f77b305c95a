package ingress

import (
	"sync"
	"time"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// paceWeight is the weight of the newest job in a tenant's moving average of job
// durations: about the last ten jobs count.
const paceWeight = 0.2

// paces keeps, per tenant, a moving average of how long its jobs ran (created to
// finished) and of the time between their ends, fed by the finisher (JobFinished) of
// this ingress. It estimates when a concurrency slot of the tenant (a job,
// synchronous-wait or stream slot) frees: with n slots held by jobs of average
// duration d, one ends about every d/n if they all run at once, and no sooner than
// the tenant's jobs have been ending (its jobs wait for their share of the workers:
// 512 queued one-minute jobs do not free a slot every 0.12 s). It is cheap and
// approximate: each ingress sees the jobs its finisher ends, and starts with no
// history.
type paces struct {
	mu sync.Mutex
	of map[string]*pace // tenant → its pace
}

// pace is one tenant's moving averages.
type pace struct {
	avg, gap time.Duration // job duration; time between job ends (0: one end seen)
	last     time.Time     // the latest end seen
}

// observe adds a finished interactive job's duration and end to its tenant's averages
// (batch jobs hold no slots and run at their own pace).
func (p *paces) observe(job *state.Job) {
	if job.Batch != "" || job.Created.IsZero() || job.Finished.Before(job.Created) {
		return
	}
	d := job.Finished.Sub(job.Created)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.of == nil {
		p.of = map[string]*pace{}
	}
	t := p.of[job.Tenant]
	if t == nil {
		p.of[job.Tenant] = &pace{avg: d, last: job.Finished}
		return
	}
	t.avg = ema(t.avg, d)
	if job.Finished.After(t.last) {
		gap := job.Finished.Sub(t.last)
		if t.gap == 0 {
			t.gap = gap
		} else {
			t.gap = ema(t.gap, gap)
		}
		t.last = job.Finished
	}
}

func ema(old, d time.Duration) time.Duration {
	return time.Duration(paceWeight*float64(d) + (1-paceWeight)*float64(old))
}

// slotFree estimates how long until one of tenant's held slots (held of them) frees:
// the tenant's average job duration divided by held, or the average time between its
// jobs' ends when that is longer; at least a second and at most ceiling (the job
// deadline: every job has ended by then). Without history it is a second.
func (p *paces) slotFree(tenant string, held int, ceiling time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.of[tenant]
	if !ok {
		return time.Second
	}
	est := max(t.avg/time.Duration(max(held, 1)), t.gap)
	if ceiling > 0 {
		est = min(est, ceiling)
	}
	return max(est, time.Second)
}
