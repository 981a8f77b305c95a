package ingress

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/spend"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// A tenant's storage quota is charged as spend.ChargeNew says: a submission that does
// not fit is refused (413 when the request alone exceeds the quota), and an ended job
// is charged its real size by JobFinished, after the archive hook. GET /v1/usage
// reports the use.

// recordExpiry is when a job's record expires: its retention from creation while it
// runs, from its end once it has ended (its archived record is kept for the
// retention from when it was written, just after the end).
func (s *Server) recordExpiry(job *state.Job) time.Time {
	from := job.Created
	if !job.Finished.IsZero() {
		from = job.Finished
	}
	if from.IsZero() {
		from = time.Now()
	}
	return from.Add(s.Store.Jobs.RecordRetention())
}

// chargeStorage charges a new job's request and allowance to its tenant's storage
// quota; it has answered when it returns false.
func (s *Server) chargeStorage(w http.ResponseWriter, r *http.Request, codec wire.ClientCodec, job *state.Job) bool {
	if !s.recordsRoom(w, r, codec, job.Tenant) {
		return false
	}
	limit := s.Limits.Of(job.Tenant).StorageBytes
	if limit > 0 && spend.RecordAllowance+int64(len(job.Request)) > limit {
		s.rejected(job.Tenant, "storage_bytes")
		writeWireError(w, codec, &wire.Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
			Message: fmt.Sprintf("The request (%d bytes, with %d bytes kept for its answer) is larger than the tenant's storage quota of %d bytes.", len(job.Request), spend.RecordAllowance, limit)})
		return false
	}
	ok, st, err := spend.ChargeNew(r.Context(), s.Store.Ledger, job.Tenant, job.ID, len(job.Request), s.recordExpiry(job), limit)
	if err != nil {
		s.limitsUnavailable(w, r, codec, err)
		return false
	}
	if ok {
		return true
	}
	if s.acceptedRetry(r, job.Tenant) { // it gets its job (charged already)
		return true
	}
	s.rejected(job.Tenant, "storage_bytes")
	after := time.Hour
	if !st.FirstExpiry.IsZero() {
		after = max(time.Second, time.Until(st.FirstExpiry))
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(after.Seconds()+0.999)))
	writeWireError(w, codec, &wire.Error{Status: spend.RefusedStatus, Type: spend.RefusedType, Code: spend.CodeStorage,
		Message: spend.StorageRefused(limit, st.Used, "records free their bytes as they expire. See GET /v1/usage.")})
	return false
}

// acceptedRetry reports whether r is a retry, under its Idempotency-Key, of a
// submission of tenant's that was accepted.
func (s *Server) acceptedRetry(r *http.Request, tenant string) bool {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		return false
	}
	claimed, err := s.Store.Jobs.IdempotencyClaimed(r.Context(), tenant, key)
	return err == nil && claimed
}

// recordsRoom refuses a job of tenant with 507 while the records bucket is full and
// the tenant holds more than its share of it (the bucket's bound over the tenants):
// the tenant that filled it is refused, the others keep working (their records stay
// in Redis until there is room). It has answered when it returns false.
func (s *Server) recordsRoom(w http.ResponseWriter, r *http.Request, codec wire.ClientCodec, tenant string) bool {
	if s.Records == nil || !s.Records.Full(r.Context()) {
		return true
	}
	share := s.Records.MaxBytes() / int64(max(s.RecordsTenants, 1))
	st, err := s.Store.Ledger.StorageOf(r.Context(), tenant)
	if err != nil {
		s.limitsUnavailable(w, r, codec, err)
		return false
	}
	if st.Used <= share {
		return true
	}
	s.rejected(tenant, "storage_bytes")
	w.Header().Set("Retry-After", "60")
	writeWireError(w, codec, &wire.Error{Status: http.StatusInsufficientStorage, Type: "insufficient_storage", Code: "insufficient_storage",
		Message: fmt.Sprintf("The fleet's job records store is full and this tenant holds more than its share of it (%d bytes); records free their bytes as they expire. See GET /v1/usage.", share)})
	return false
}

// settleStorage charges an ended job its real size, whatever the quota (the bytes are
// written: the tenant's next job is refused instead), and drops the search results
// kept only for a running job's redelivered searches. A job that was never accepted
// (not ended: its record is deleted, or was never written) gives its charge back.
func (s *Server) settleStorage(ctx context.Context, job *state.Job) error {
	limit := s.Limits.Of(job.Tenant).StorageBytes
	if !job.Status.Terminal() {
		if limit <= 0 {
			return nil
		}
		return s.Store.Ledger.ReleaseRecord(ctx, job.Tenant, job.ID)
	}
	if err := s.Store.Ledger.DropSearchResults(ctx, job.ID); err != nil {
		s.Log.Warn("api: dropping an ended job's search results (they expire on their own)", "job", job.ID, "err", err)
	}
	return s.chargeFootprint(ctx, job)
}

// chargeFootprint charges an ended job what it keeps (state.Ledger.JobFootprint),
// whatever the quota.
func (s *Server) chargeFootprint(ctx context.Context, job *state.Job) error {
	limit := s.Limits.Of(job.Tenant).StorageBytes
	if limit <= 0 {
		return nil
	}
	n, err := s.Store.Ledger.JobFootprint(ctx, job.ID)
	if err != nil {
		return err
	}
	_, _, err = s.Store.Ledger.ChargeRecord(ctx, job.Tenant, job.ID, n, s.recordExpiry(job), limit, true)
	return err
}

// forgetAnswer drops the answer of an ended store: false job, done, once its client
// has it (state.Jobs.ForgetAnswer: only the summary stays), and charges the tenant
// what is left.
func (s *Server) forgetAnswer(ctx context.Context, done *state.Job) {
	dropped, err := s.Store.Jobs.ForgetAnswer(ctx, done.ID)
	if err == nil && dropped {
		err = s.chargeFootprint(ctx, done)
	}
	if err != nil {
		s.Log.Warn("api: dropping a store: false job's answer (it expires with the record)", "job", done.ID, "err", err)
	}
}

// storageUsage is GET /v1/usage's storage: the job records' bytes against the
// storage quota, and the files' against the file quota (null limit: none).
type storageUsage struct {
	UsedBytes      int64  `json:"used_bytes"`
	LimitBytes     *int64 `json:"limit_bytes"`
	Records        int64  `json:"records"`
	FileBytes      int64  `json:"file_bytes"`
	FileLimitBytes *int64 `json:"file_limit_bytes"`
	Files          int    `json:"files"`
}

// storageOf reads tenant's storage use for GET /v1/usage.
func (s *Server) storageOf(ctx context.Context, tenant string) (storageUsage, error) {
	st, err := s.Store.Ledger.StorageOf(ctx, tenant)
	if err != nil {
		return storageUsage{}, err
	}
	files, fileBytes, err := s.Store.Files.FileUsage(ctx, tenant)
	if err != nil {
		return storageUsage{}, err
	}
	l := s.Limits.Of(tenant)
	u := storageUsage{UsedBytes: st.Used, Records: st.Records, FileBytes: fileBytes, Files: files}
	if l.StorageBytes > 0 {
		u.LimitBytes = &l.StorageBytes
	}
	if l.FileBytes > 0 {
		u.FileLimitBytes = &l.FileBytes
	}
	return u, nil
}
