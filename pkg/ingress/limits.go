package ingress

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Per-tenant limits (config.Limits, Server.Limits): the request rate is checked when
// a request is authenticated; a request that submits a job takes one of its tenant's
// job slots (released when the job ends, by the finisher: Server.JobFinished) and, if
// it waits for the answer, a synchronous-wait or stream slot for as long as it waits
// (released when it returns, whether the job ended or the client left), and its
// record is charged to the tenant's storage quota (quota.go). A refusal is 429 with
// Retry-After in the protocol's error shape, counted in
// fleet_tenant_rejected_total{tenant,limit}.

// leaseTTL is how long a wait or stream slot outlives its ingress: a holder renews
// it every leaseTTL/3, so the slot of an ingress that died is free again after it.
const leaseTTL = 30 * time.Second

// jobSlotMargin is how long past its deadline a job's slot is kept if its ending is
// never seen (the reaper ends every overdue job, so this is a backstop).
const jobSlotMargin = time.Minute

// hold is what a request waits for its answer as.
type hold int

const (
	holdNone   hold = iota // answered at once (a background job)
	holdSync               // a synchronous wait
	holdStream             // a server-sent event stream
)

// refuse answers 429 for tenant's limit, with Retry-After (at least 1 s).
func (s *Server) refuse(w http.ResponseWriter, codec wire.ClientCodec, tenant, limit string, after time.Duration, msg string) {
	s.rejected(tenant, limit)
	setRetryAfter(w, after)
	writeWireError(w, codec, &wire.Error{Status: http.StatusTooManyRequests, Type: "rate_limit_exceeded", Code: "rate_limit_exceeded", Message: msg})
}

// rejected counts a refusal of tenant's limit (fleet_tenant_rejected_total).
func (s *Server) rejected(tenant, limit string) {
	if s.Metrics != nil {
		s.Metrics.TenantRejected.WithLabelValues(tenant, limit).Inc()
	}
}

// setRetryAfter says to retry after d (at least 1 s).
func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(d.Seconds())))))
}

// limitsUnavailable answers a request whose limits could not be checked.
func (s *Server) limitsUnavailable(w http.ResponseWriter, r *http.Request, codec wire.ClientCodec, err error) {
	s.logFailure(r.Context(), "api: checking a tenant's limits", "err", err)
	w.Header().Set("Retry-After", "1")
	writeWireError(w, codec, &wire.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Message: "The fleet is unavailable; try again."})
}

// allowRate takes one request from tenant's request rate; it has answered when it
// returns false.
func (s *Server) allowRate(w http.ResponseWriter, r *http.Request, codec wire.ClientCodec, tenant string) bool {
	wait, msg, err := s.takeRate(r.Context(), tenant)
	if err != nil {
		s.limitsUnavailable(w, r, codec, err)
		return false
	}
	if wait > 0 {
		s.refuse(w, codec, tenant, "rate", wait, msg)
		return false
	}
	return true
}

// takeRate takes one request from tenant's request rate: a wait above zero, with the
// words to say so, when there is none to take.
func (s *Server) takeRate(ctx context.Context, tenant string) (wait time.Duration, msg string, err error) {
	l := s.Limits.Of(tenant)
	if l.RequestsPerSecond <= 0 {
		return 0, "", nil
	}
	if wait, err = s.Store.Leases.AllowTenant(ctx, tenant, l.RequestsPerSecond, l.Burst); err != nil || wait <= 0 {
		return wait, "", err
	}
	return wait, fmt.Sprintf("Rate limit reached: %g requests per second (burst %d); retry after the time in Retry-After.", l.RequestsPerSecond, l.Burst), nil
}

// admit takes the slots a request that submits job needs: one of its tenant's job
// slots, and a wait or stream slot for as long as it holds h. It has answered when
// ok is false; otherwise release (never nil) must be called when the request is done
// waiting.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, codec wire.ClientCodec, job *state.Job, h hold) (release func(), ok bool) {
	l := s.Limits.Of(job.Tenant)
	took, err := s.Store.Leases.AcquireLease(r.Context(), state.LeaseJobs, job.Tenant, job.ID, l.QueuedJobs, time.Until(job.Deadline)+jobSlotMargin)
	if err != nil {
		s.limitsUnavailable(w, r, codec, err)
		return nil, false
	}
	if !took {
		s.refuse(w, codec, job.Tenant, "queued_jobs", s.pace.slotFree(job.Tenant, l.QueuedJobs, s.JobTimeout), fmt.Sprintf("Too many unfinished jobs: at most %d at once; retry when some have ended.", l.QueuedJobs))
		return nil, false
	}
	if !s.chargeStorage(w, r, codec, job) {
		s.Store.Leases.ReleaseLease(context.WithoutCancel(r.Context()), state.LeaseJobs, job.Tenant, job.ID)
		return nil, false
	}
	if h == holdNone {
		return func() {}, true
	}
	release, ok = s.admitWait(w, r, codec, job.Tenant, h)
	if !ok {
		s.JobFinished(context.WithoutCancel(r.Context()), &state.Job{ID: job.ID, Tenant: job.Tenant}) // its job slot and storage
	}
	return release, ok
}

// admitWait takes one of tenant's synchronous-wait or stream slots and keeps it
// renewed until release is called. It has answered when ok is false.
func (s *Server) admitWait(w http.ResponseWriter, r *http.Request, codec wire.ClientCodec, tenant string, h hold) (release func(), ok bool) {
	l := s.Limits.Of(tenant)
	kind, limit, name, what := state.LeaseSyncWaits, l.SyncWaits, "sync_waits", "requests waiting for their answer"
	if h == holdStream {
		kind, limit, name, what = state.LeaseStreams, l.Streams, "streams", "open streams"
	}
	return s.takeSlot(w, r, codec, tenant, kind, limit, name,
		fmt.Sprintf("Too many %s: at most %d at once; retry later, or submit with POST /v1/jobs and poll.", what, limit))
}

// takeSlot takes one of tenant's limit slots of kind and keeps it renewed until
// release is called; none free is refused as limit name, in msg's words. It has
// answered when ok is false.
func (s *Server) takeSlot(w http.ResponseWriter, r *http.Request, codec wire.ClientCodec, tenant, kind string, limit int, name, msg string) (release func(), ok bool) {
	if limit <= 0 {
		return func() {}, true
	}
	id := state.NewID("lease_")
	took, err := s.Store.Leases.AcquireLease(r.Context(), kind, tenant, id, limit, leaseTTL)
	if err != nil {
		s.limitsUnavailable(w, r, codec, err)
		return nil, false
	}
	if !took {
		s.refuse(w, codec, tenant, name, s.pace.slotFree(tenant, limit, s.JobTimeout), msg)
		return nil, false
	}
	return s.keepLease(r.Context(), kind, tenant, id, limit), true
}

// keepLease renews a slot taken with AcquireLease every leaseTTL/3 until release is
// called, which gives it back.
func (s *Server) keepLease(parent context.Context, kind, tenant, id string, limit int) (release func()) {
	ctx, stop := context.WithCancel(context.WithoutCancel(parent))
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(leaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if _, err := s.Store.Leases.AcquireLease(ctx, kind, tenant, id, limit, leaseTTL); err != nil && ctx.Err() == nil {
					s.Log.Warn("api: renewing a tenant's slot", "kind", kind, "err", err)
				}
			}
		}
	})
	return func() {
		stop()
		wg.Wait()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(parent), 5*time.Second)
		defer cancel()
		if err := s.Store.Leases.ReleaseLease(rctx, kind, tenant, id); err != nil {
			s.Log.Warn("api: releasing a tenant's slot (it expires on its own)", "kind", kind, "err", err)
		}
	}
}

// JobFinished frees the job slot of a job that ended (a jobs.Hook, run by the
// finisher) and charges its record's real size to its tenant's storage quota (see
// settleStorage; a job that was never accepted gives its charge back). Batch lines
// hold no slot; releasing one is a no-op. A tenant without a job limit took no slot
// (admit), so none is freed (one taken under a limit since removed expires on its
// own). A completed response that continues a conversation adds its turn to it
// (conversationTurn).
func (s *Server) JobFinished(ctx context.Context, job *state.Job) error {
	s.pace.observe(job)
	var release error
	if s.Limits.Of(job.Tenant).QueuedJobs > 0 { // no limit, no slot taken (admit)
		release = s.Store.Leases.ReleaseLease(ctx, state.LeaseJobs, job.Tenant, job.ID)
	}
	return errors.Join(release, s.settleStorage(ctx, job), s.conversationTurn(ctx, job))
}

// holdOf is what a request of a client protocol waits as.
func holdOf(req *wire.Request) hold {
	switch {
	case req.Background:
		return holdNone
	case req.Stream:
		return holdStream
	}
	return holdSync
}

// chatCodec answers the OpenAI routes' limits.
var chatCodec wire.ClientCodec = openaichat.Client
