package batch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// chargeLine charges a batch line's job record (its request and state.RecordAllowance)
// to its tenant's storage quota before the record is written, as the ingress does
// for a submitted job; the finisher charges its real size when it ends. A line that
// does not fit is recorded without its request and ended at once, failed with
// storage_quota_exceeded (429): the batch counts it and its error file says why, and
// the next lines are tried in turn (records that expire make room). It reports
// whether the line's job may be submitted. Charging a line again (an expansion
// redelivered) changes nothing.
func (s *Service) chargeLine(ctx context.Context, job *state.Job) (bool, error) {
	limit := s.Limits.Of(job.Tenant).StorageBytes
	if limit <= 0 {
		return true, nil
	}
	ok, st, err := s.Store.ChargeRecord(ctx, job.Tenant, job.ID, int64(len(job.Request))+state.RecordAllowance, job.Created.Add(s.Store.RecordRetention()), limit, false)
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
	je := &state.JobError{Status: http.StatusTooManyRequests, Type: "insufficient_quota", Code: "storage_quota_exceeded",
		Message: fmt.Sprintf("The tenant's storage quota of %d bytes is used up (%d bytes of job records kept); this line was not run. Records free their bytes as they expire.", limit, st.Used)}
	if err := s.Ender.End(ctx, job.ID, jobs.Ending{Status: state.Failed, Error: je}); err != nil {
		return false, err
	}
	return false, nil
}
