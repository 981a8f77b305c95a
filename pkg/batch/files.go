package batch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// DefaultMaxFileBytes bounds an uploaded file unless Service.MaxFileBytes says
// otherwise: the OpenAI Batch API's 200 MB. Uploads are streamed into the object store
// while they are validated, so the limit costs neither memory nor temporary disk.
const DefaultMaxFileBytes = 200 << 20

// File lifetimes. An upload names its own with OpenAI's expires_after
// ({anchor: "created_at", seconds: N}); OpenAI accepts 3600 s to 30 days, the fleet
// any N from 1 s to 30 days. Batch input, output and error files the fleet writes live
// as long as their batch's record: its completion window plus the job retention.
const (
	// DefaultFileExpiry is an upload's lifetime when it names none (OpenAI keeps
	// batch files 30 days).
	DefaultFileExpiry = 30 * 24 * time.Hour
	// MaxExpiresAfter is the longest lifetime an upload may ask for.
	MaxExpiresAfter = 30 * 24 * time.Hour
)

// File purposes: inputs are uploaded as "batch"; the fleet writes "batch_output".
const (
	PurposeBatch  = "batch"
	PurposeOutput = "batch_output"
)

// A file's metadata is a state.File; its bytes are the object of the same name in
// the bus.BucketFiles object store.

// objects returns the file object store, creating it (file storage, the JOBS stream's
// replica count) the first time. Creating it is idempotent: another process may win.
func (s *Service) objects(ctx context.Context) (jetstream.ObjectStore, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.obs != nil {
		return s.obs, nil
	}
	// The store is bounded (FilesMaxBytes; it refuses what does not fit rather than
	// drop old files) and its objects expire after the longest any file may live, a
	// backstop for the sweep (sweepFiles) that deletes each file at its own expiry.
	cfg := jetstream.ObjectStoreConfig{Bucket: bus.BucketFiles, Storage: jetstream.FileStorage,
		Description: "batch input, output and error files", MaxBytes: s.FilesMaxBytes, TTL: s.longestFileLife()}
	if s.FilesMaxBytes <= 0 {
		cfg.MaxBytes = -1
	}
	obs, err := s.Bus.ObjectStore(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("batch: object store %s: %w", bus.BucketFiles, err)
	}
	s.obs = obs
	return obs, nil
}

// longestFileLife is the longest any file lives: an upload's longest expiry or a
// batch's longest window plus the job retention, and a day's margin.
func (s *Service) longestFileLife() time.Duration {
	return max(s.fileExpiry(), MaxExpiresAfter, maxWindow+s.Store.RecordRetention()) + 24*time.Hour
}

func (s *Service) fileExpiry() time.Duration {
	if s.FileExpiry > 0 {
		return s.FileExpiry
	}
	return DefaultFileExpiry
}

// saveFile stores r as the file f (its Bytes are set from what was stored) and records
// its metadata. Saving a file id again replaces it (finalizing twice writes the same
// output file).
func (s *Service) saveFile(ctx context.Context, f *state.File, r io.Reader) error {
	obs, err := s.objects(ctx)
	if err != nil {
		return err
	}
	info, err := obs.Put(ctx, objectMeta(f), r)
	if err != nil {
		return storeError(f, err)
	}
	f.Bytes = int64(info.Size)
	return s.Store.SaveFile(ctx, f)
}

func objectMeta(f *state.File) jetstream.ObjectMeta {
	return jetstream.ObjectMeta{Name: f.ID, Description: f.Filename,
		Metadata: map[string]string{"tenant": f.Tenant, "purpose": f.Purpose, "filename": f.Filename}}
}

// storeError is the error of storing f: Full when the object store is (nothing of
// the file is kept: the store purges a partial object).
func storeError(f *state.File, err error) error {
	if e, ok := errors.AsType[*Error](err); ok {
		return e
	}
	if api, ok := errors.AsType[*jetstream.APIError](err); ok && (strings.Contains(api.Description, "maximum bytes") || strings.Contains(api.Description, "insufficient resources")) ||
		strings.Contains(err.Error(), "maximum bytes exceeded") || strings.Contains(err.Error(), "insufficient resources") {
		return &Error{Kind: Full, Code: "insufficient_storage", Message: "The file store is full; delete files or try again later.", Err: err}
	}
	return fmt.Errorf("batch: storing file %s: %w", f.ID, err)
}

// objectWriter streams one file into the object store as it is written.
type objectWriter struct {
	pw   *io.PipeWriter
	done chan struct{}
	size int64
	err  error
}

// createObject starts storing f; the caller writes its bytes, then calls finish (or
// abort: nothing is kept).
func (s *Service) createObject(ctx context.Context, f *state.File) (*objectWriter, error) {
	obs, err := s.objects(ctx)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	o := &objectWriter{pw: pw, done: make(chan struct{})}
	go func() {
		defer close(o.done)
		info, err := obs.Put(ctx, objectMeta(f), pr)
		if err != nil {
			o.err = storeError(f, err)
			pr.CloseWithError(o.err)
			return
		}
		o.size = int64(info.Size)
	}()
	return o, nil
}

func (o *objectWriter) Write(b []byte) (int, error) { return o.pw.Write(b) }

// finish ends the object and returns its size.
func (o *objectWriter) finish() (int64, error) {
	o.pw.Close()
	<-o.done
	return o.size, o.err
}

// abort drops the object: the store purges what it had of it.
func (o *objectWriter) abort() {
	o.pw.CloseWithError(errAborted)
	<-o.done
}

var errAborted = errors.New("batch: file refused")

// checkFileQuota refuses a new file of tenant's when the tenant's files are at their
// count or size quota, and returns how many bytes more it may store (-1: no bound).
func (s *Service) checkFileQuota(ctx context.Context, tenant string) (int64, error) {
	l := s.Limits.Of(tenant)
	if l.Files <= 0 && l.FileBytes <= 0 {
		return -1, nil
	}
	n, used, err := s.Store.FileUsage(ctx, tenant)
	if err != nil {
		return 0, unavailable(err, "Could not check the file quota; try again.")
	}
	if l.Files > 0 && n >= l.Files {
		return 0, s.limited(tenant, "files", "The tenant's file quota of %d files is used up; delete files to store more.", l.Files)
	}
	if l.FileBytes <= 0 {
		return -1, nil
	}
	if used >= l.FileBytes {
		return 0, s.limited(tenant, "file_bytes", "The tenant's storage quota of %d bytes is used up; delete files to store more.", l.FileBytes)
	}
	return l.FileBytes - used, nil
}

// limited is a refusal by tenant's limit (counted in fleet_tenant_rejected_total).
func (s *Service) limited(tenant, limit, format string, args ...any) *Error {
	if s.Metrics != nil {
		s.Metrics.TenantRejected.WithLabelValues(tenant, limit).Inc()
	}
	return &Error{Kind: Limited, Code: "quota_exceeded", Limit: limit, Message: fmt.Sprintf(format, args...), RetryAfter: time.Minute}
}

// quotaReader reads at most left bytes of r; past them it fails with the quota's
// refusal.
type quotaReader struct {
	r    io.Reader
	left int64
	err  error
}

func (q *quotaReader) Read(b []byte) (int, error) {
	if q.left < 0 {
		return 0, q.err
	}
	n, err := q.r.Read(b)
	q.left -= int64(n)
	if q.left < 0 {
		return n, q.err
	}
	return n, err
}

// OpenFile opens a stored file's bytes (state.ErrNotFound: no such file).
func (s *Service) OpenFile(ctx context.Context, id string) (io.ReadCloser, error) {
	obs, err := s.objects(ctx)
	if err != nil {
		return nil, err
	}
	r, err := obs.Get(ctx, id)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, state.ErrNotFound
	}
	return r, err
}

// MaxUploadBytes is the most an uploaded file may hold.
func (s *Service) MaxUploadBytes() int64 {
	if s.MaxFileBytes > 0 {
		return s.MaxFileBytes
	}
	return DefaultMaxFileBytes
}

// StoreUpload stores a batch input file of tenant's straight into the object store
// while it validates it (nothing is buffered in memory or on disk), reading r to its
// end. The file is not listed until RecordUpload; an invalid one (Validation.Invalid
// > 0), or one refused by the tenant's quota or a full store, leaves nothing stored.
// A line too long to read is a LineTooLongError.
func (s *Service) StoreUpload(ctx context.Context, tenant, filename string, r io.Reader) (*state.File, *Validation, error) {
	left, err := s.checkFileQuota(ctx, tenant)
	if err != nil {
		return nil, nil, err
	}
	if left >= 0 {
		r = &quotaReader{r: r, left: left, err: s.limited(tenant, "file_bytes", "The file does not fit in the tenant's storage quota of %d bytes.", s.Limits.Of(tenant).FileBytes)}
	}
	f := &state.File{ID: state.NewID("file-"), Tenant: tenant, Filename: filename, Purpose: PurposeBatch, Created: time.Now().UTC()}
	obs, err := s.objects(ctx)
	if err != nil {
		return nil, nil, unavailable(err, "Could not store the file; try again.")
	}
	pr, pw := io.Pipe()
	var check *Validation
	var verr error
	validated := make(chan struct{})
	go func() {
		defer close(validated)
		if check, verr = validate(pr, s.Models, s.Research); verr != nil {
			pr.CloseWithError(verr)
			return
		}
		io.Copy(io.Discard, pr)
	}()
	src := &readErr{r: r}
	info, err := obs.Put(ctx, objectMeta(f), io.TeeReader(src, pw))
	pw.CloseWithError(err)
	<-validated
	var long LineTooLongError
	switch {
	case src.err != nil:
		// The upload's own read error (over its size limit or the quota, a client
		// that left) is the caller's to word.
		return nil, nil, src.err
	case err != nil && !errors.As(verr, &long):
		err = storeError(f, err)
		if _, ok := errors.AsType[*Error](err); !ok {
			s.Log.Error("batch: storing an upload", "err", err)
			err = unavailable(err, "Could not store the file; try again.")
		}
		return nil, nil, err
	case verr != nil || check.Invalid > 0:
		// Refused (check is nil when verr is set): what was stored goes. A line too
		// long may have stopped the store already (err set): then nothing was kept.
		if err == nil {
			obs.Delete(context.WithoutCancel(ctx), f.ID)
		}
		return nil, check, verr
	}
	f.Bytes = int64(info.Size)
	return f, check, nil
}

// RecordUpload lists a file StoreUpload stored, to expire after expiresAfter (0: the
// default FileExpiry).
func (s *Service) RecordUpload(ctx context.Context, f *state.File, expiresAfter time.Duration) error {
	if expiresAfter <= 0 {
		expiresAfter = s.fileExpiry()
	}
	f.Expires = f.Created.Add(expiresAfter)
	if err := s.Store.SaveFile(ctx, f); err != nil {
		s.DiscardUpload(ctx, f)
		return unavailable(err, "Could not record the file; try again.")
	}
	return nil
}

// DiscardUpload deletes the bytes of a file StoreUpload stored that will not be
// recorded.
func (s *Service) DiscardUpload(ctx context.Context, f *state.File) {
	if obs, err := s.objects(ctx); err == nil {
		obs.Delete(context.WithoutCancel(ctx), f.ID)
	}
}

// sweepFiles deletes the files past their expiry: their bytes, then their records.
func (s *Service) sweepFiles(ctx context.Context) {
	for {
		expired, err := s.Store.ExpiredFiles(ctx, 100)
		if err != nil {
			s.Log.Warn("batch: listing expired files", "err", err)
			return
		}
		for _, f := range expired {
			if err := s.DeleteFile(ctx, f); err != nil {
				s.Log.Warn("batch: deleting an expired file", "file", f.ID, "err", err)
				return
			}
		}
		if len(expired) < 100 {
			return
		}
	}
}

// File returns a file of tenant's: another tenant's is NotFound.
func (s *Service) File(ctx context.Context, tenant, id string) (*state.File, error) {
	f, err := s.Store.GetFile(ctx, id)
	if errors.Is(err, state.ErrNotFound) || err == nil && f.Tenant != tenant {
		return nil, &Error{Kind: NotFound, Code: "file_not_found", Param: "id", Message: fmt.Sprintf("No such file: %q.", redact.Clip(id, 64))}
	}
	if err != nil {
		return nil, unavailable(err, "Reading the file failed.")
	}
	return f, nil
}

// DeleteFile deletes a file: its bytes, then its metadata.
func (s *Service) DeleteFile(ctx context.Context, f *state.File) error {
	obs, err := s.objects(ctx)
	if err == nil {
		err = obs.Delete(ctx, f.ID)
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			err = nil
		}
	}
	if err == nil {
		err = s.Store.DeleteFile(ctx, f)
	}
	if err != nil {
		return unavailable(err, "Deleting the file failed; try again.")
	}
	return nil
}

// Files returns up to limit of tenant's files, newest first unless asc, of one
// purpose (any when purpose is ""), after the file after, and whether more follow.
func (s *Service) Files(ctx context.Context, tenant, purpose, after string, asc bool, limit int) ([]*state.File, bool, error) {
	return page(ctx, s.Store.TenantFiles(ctx, tenant, after, asc), limit,
		func(ctx context.Context, id string) (*state.File, bool, error) {
			f, err := s.Store.GetFile(ctx, id)
			if errors.Is(err, state.ErrNotFound) {
				return nil, false, nil
			}
			return f, err == nil && (purpose == "" || f.Purpose == purpose), err
		})
}

// readErr remembers the error its reader failed with (io.EOF is no failure).
type readErr struct {
	r   io.Reader
	err error
}

func (e *readErr) Read(b []byte) (int, error) {
	n, err := e.r.Read(b)
	if err != nil && !errors.Is(err, io.EOF) {
		e.err = err
	}
	return n, err
}
