package batch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// DefaultMaxFileBytes bounds an uploaded file unless Service.MaxFileBytes says
// otherwise: the OpenAI Batch API's 200 MB. Uploads are streamed to a temporary file
// while they are validated, so the limit costs disk, not memory.
const DefaultMaxFileBytes = 200 << 20

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
	obs, err := s.Bus.JS.ObjectStore(ctx, bus.BucketFiles)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		cfg := jetstream.ObjectStoreConfig{Bucket: bus.BucketFiles, Storage: jetstream.FileStorage, Replicas: s.replicas(ctx),
			Description: "batch input, output and error files"}
		obs, err = s.Bus.JS.CreateObjectStore(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			obs, err = s.Bus.JS.ObjectStore(ctx, bus.BucketFiles)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("batch: object store %s: %w", bus.BucketFiles, err)
	}
	s.obs = obs
	return obs, nil
}

// replicas is the JOBS stream's replica count: files are as durable as the jobs.
func (s *Service) replicas(ctx context.Context) int {
	st, err := s.Bus.JS.Stream(ctx, bus.StreamJobs)
	if err != nil {
		return 1
	}
	return max(st.CachedInfo().Config.Replicas, 1)
}

// saveFile stores r as the file f (its Bytes are set from what was stored) and records
// its metadata. Saving a file id again replaces it (finalizing twice writes the same
// output file).
func (s *Service) saveFile(ctx context.Context, f *state.File, r io.Reader) error {
	obs, err := s.objects(ctx)
	if err != nil {
		return err
	}
	info, err := obs.Put(ctx, jetstream.ObjectMeta{Name: f.ID, Description: f.Filename,
		Metadata: map[string]string{"tenant": f.Tenant, "purpose": f.Purpose, "filename": f.Filename}}, r)
	if err != nil {
		return fmt.Errorf("batch: storing file %s: %w", f.ID, err)
	}
	f.Bytes = int64(info.Size)
	return s.Store.SaveFile(ctx, f)
}

// errNoFile means there is no such file.
var errNoFile = state.ErrNotFound

// OpenFile opens a stored file's bytes.
func (s *Service) OpenFile(ctx context.Context, id string) (io.ReadCloser, error) {
	obs, err := s.objects(ctx)
	if err != nil {
		return nil, err
	}
	r, err := obs.Get(ctx, id)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, errNoFile
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

// Upload stores a batch input file of tenant's, validated already (Validate), under a
// new id.
func (s *Service) Upload(ctx context.Context, tenant, filename string, r io.Reader) (*state.File, error) {
	f := &state.File{ID: state.NewID("file-"), Tenant: tenant, Filename: filename, Purpose: PurposeBatch, Created: time.Now().UTC()}
	if err := s.saveFile(ctx, f, r); err != nil {
		s.Log.Error("batch: storing an upload", "err", err)
		return nil, unavailable(err, "Could not store the file; try again.")
	}
	return f, nil
}

// File returns a file of tenant's: another tenant's is NotFound.
func (s *Service) File(ctx context.Context, tenant, id string) (*state.File, error) {
	f, err := s.Store.GetFile(ctx, id)
	if errors.Is(err, errNoFile) || err == nil && f.Tenant != tenant {
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
			if errors.Is(err, errNoFile) {
				return nil, false, nil
			}
			return f, err == nil && (purpose == "" || f.Purpose == purpose), err
		})
}
