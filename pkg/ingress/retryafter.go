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
// finished), fed by the finisher (JobFinished) of this ingress. It estimates when a
// concurrency slot of the tenant (a job, synchronous-wait or stream slot) frees:
// with n slots held by jobs of average duration d, one ends about every d/n. It is
// cheap (one float per tenant, no I/O) and approximate: each ingress sees the jobs its
// finisher ends, and starts with no history.
type paces struct {
	mu  sync.Mutex
	avg map[string]time.Duration // tenant → moving average of job durations
}

// observe adds a finished interactive job's duration to its tenant's average (batch
// jobs hold no slots and run at their own pace).
func (p *paces) observe(job *state.Job) {
	if job.Batch != "" || job.Created.IsZero() || job.Finished.Before(job.Created) {
		return
	}
	d := job.Finished.Sub(job.Created)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.avg == nil {
		p.avg = map[string]time.Duration{}
	}
	if old, ok := p.avg[job.Tenant]; ok {
		d = time.Duration(paceWeight*float64(d) + (1-paceWeight)*float64(old))
	}
	p.avg[job.Tenant] = d
}

// slotFree estimates how long until one of tenant's held slots (held of them) frees:
// the tenant's average job duration divided by held, at least a second and at most
// ceiling (the job deadline: every job has ended by then). Without history it is a
// second.
func (p *paces) slotFree(tenant string, held int, ceiling time.Duration) time.Duration {
	p.mu.Lock()
	d, ok := p.avg[tenant]
	p.mu.Unlock()
	if !ok {
		return time.Second
	}
	est := d / time.Duration(max(held, 1))
	if ceiling > 0 {
		est = min(est, ceiling)
	}
	return max(est, time.Second)
}
