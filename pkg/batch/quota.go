package batch

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/spend"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// chargeLine charges a batch line's job record (its request and spend.RecordAllowance)
// to its tenant's storage quota before the record is written, as the ingress does
// for a submitted job; the finisher charges its real size when it ends. A line that
// does not fit is recorded without its request and ended at once, failed with
// storage_quota_exceeded (429): the batch counts it and its error file says why, and
// the next lines are tried in turn (records that expire make room). It reports
// whether the line's job may be submitted. Charging a line again (an expansion
// redelivered) changes nothing.
func (s *Service) chargeLine(ctx context.Context, job *state.Job) (bool, error) {
	limit := s.Limits.Of(job.Tenant).StorageBytes
	ok, st, err := spend.ChargeNew(ctx, s.Store, job.Tenant, job.ID, len(job.Request), job.Created.Add(s.Store.RecordRetention()), limit)
	if err != nil || ok {
		return ok, err
	}
	if s.Metrics != nil {
		s.Metrics.TenantRejected.WithLabelValues(job.Tenant, "storage_bytes").Inc()
	}
	refused := *job
	refused.Request = json.RawMessage(`{}`)
	if err := s.Store.CreateJob(ctx, &refused); err != nil && !errors.Is(err, state.ErrExists) {
		return false, err
	}
	je := &state.JobError{Status: spend.RefusedStatus, Type: spend.RefusedType, Code: spend.CodeStorage,
		Message: spend.StorageRefused(limit, st.Used, "this line was not run. Records free their bytes as they expire.")}
	if err := s.Ender.End(ctx, job.ID, jobs.Ending{Status: state.Failed, Error: je}); err != nil {
		return false, err
	}
	return false, nil
}
