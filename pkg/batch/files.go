package batch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/searchfleet/searchfleet/internal/httpx"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// DefaultMaxFileBytes bounds an uploaded file unless Service.MaxFileBytes says
// otherwise: the OpenAI Batch API's 200 MB. Uploads are streamed to a temporary file
// while they are validated, so the limit costs disk, not memory.
const DefaultMaxFileBytes = 200 << 20

// File purposes: inputs are uploaded as "batch"; the fleet writes "batch_output".
const (
	purposeBatch  = "batch"
	purposeOutput = "batch_output"
)

// fileRecord is a file's metadata (the keyFile hash); its bytes are the object of the
// same name in the bus.BucketFiles object store.
type fileRecord struct {
	ID       string
	Tenant   string
	Filename string
	Purpose  string
	Bytes    int64
	Created  time.Time
}

// fileView is the OpenAI file object.
type fileView struct {
	ID            string  `json:"id"`
	Object        string  `json:"object"`
	Bytes         int64   `json:"bytes"`
	CreatedAt     int64   `json:"created_at"`
	Filename      string  `json:"filename"`
	Purpose       string  `json:"purpose"`
	Status        string  `json:"status"`
	ExpiresAt     *int64  `json:"expires_at"`
	StatusDetails *string `json:"status_details"`
}

func (f *fileRecord) view() fileView {
	return fileView{ID: f.ID, Object: "file", Bytes: f.Bytes, CreatedAt: f.Created.Unix(), Filename: f.Filename, Purpose: f.Purpose, Status: "processed"}
}

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
func (s *Service) saveFile(ctx context.Context, f *fileRecord, r io.Reader) error {
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
	_, err = s.Store.R.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, s.Store.K.File(f.ID), "id", f.ID, "tenant", f.Tenant, "filename", f.Filename, "purpose", f.Purpose,
			"bytes", f.Bytes, "created", state.Millis(f.Created))
		p.ZAdd(ctx, s.Store.K.TenantFiles(f.Tenant), redis.Z{Score: float64(f.Created.UnixMilli()), Member: f.ID})
		return nil
	})
	if err != nil {
		return fmt.Errorf("batch: recording file %s: %w", f.ID, err)
	}
	return nil
}

// errNoFile means there is no such file.
var errNoFile = errors.New("batch: no such file")

// fileByID reads a file's metadata.
func (s *Service) fileByID(ctx context.Context, id string) (*fileRecord, error) {
	m, err := s.Store.R.HGetAll(ctx, s.Store.K.File(id)).Result()
	if err != nil {
		return nil, err
	}
	if m["id"] == "" {
		return nil, errNoFile
	}
	n, _ := strconv.ParseInt(m["bytes"], 10, 64)
	return &fileRecord{ID: m["id"], Tenant: m["tenant"], Filename: m["filename"], Purpose: m["purpose"], Bytes: n, Created: state.FromMillis(m["created"])}, nil
}

// openFile opens a stored file's bytes.
func (s *Service) openFile(ctx context.Context, id string) (io.ReadCloser, error) {
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

func (s *Service) maxFileBytes() int64 {
	if s.MaxFileBytes > 0 {
		return s.MaxFileBytes
	}
	return DefaultMaxFileBytes
}

// uploadFile is POST /v1/files (multipart: purpose, file). A batch input file is
// validated line by line as it streams in; an invalid one is refused with every
// problem's line number and nothing is stored.
func (s *Service) uploadFile(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, s.maxFileBytes())
	mr, err := r.MultipartReader()
	if err != nil {
		httpx.WriteError(w, http.StatusBadRequest, "invalid_request_error", "", "", "Send the file as multipart/form-data with the fields 'purpose' and 'file'.")
		return
	}
	tmp, err := os.CreateTemp("", "searchfleet-upload-*")
	if err != nil {
		httpx.WriteError(w, http.StatusInternalServerError, "server_error", "", "", "Could not buffer the upload.")
		return
	}
	defer func() { tmp.Close(); os.Remove(tmp.Name()) }()
	up, err := s.readUpload(mr, tmp)
	if err != nil {
		uploadFailed(w, err, s.maxFileBytes())
		return
	}
	switch {
	case up.purpose != purposeBatch:
		httpx.WriteError(w, http.StatusBadRequest, "invalid_request_error", "", "purpose", fmt.Sprintf("purpose %q is not supported; this server stores files with purpose \"batch\"", up.purpose))
		return
	case up.check == nil:
		httpx.WriteError(w, http.StatusBadRequest, "invalid_request_error", "", "file", "The 'file' field is missing.")
		return
	case up.check.Invalid > 0:
		httpx.WriteJSON(w, http.StatusBadRequest, up.check.asInputError("file"))
		return
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		httpx.WriteError(w, http.StatusInternalServerError, "server_error", "", "", "Could not read back the upload.")
		return
	}
	f := &fileRecord{ID: state.NewID("file-"), Tenant: httpx.Tenant(r), Filename: up.filename, Purpose: purposeBatch, Created: time.Now().UTC()}
	if err := s.saveFile(r.Context(), f, tmp); err != nil {
		s.Log.Error("batch: storing an upload", "err", err)
		httpx.WriteError(w, http.StatusServiceUnavailable, "server_error", "", "", "Could not store the file; try again.")
		return
	}
	httpx.WriteJSON(w, http.StatusOK, f.view())
}

// upload is what a multipart upload carried.
type upload struct {
	purpose  string
	filename string
	// check is the file's validation (nil: no file part).
	check *validation
}

// readUpload reads the parts of an upload, copying the file into tmp while it is
// validated (the SDKs send the file before the purpose, so every file is validated
// as a batch input; other purposes are refused afterwards).
func (s *Service) readUpload(mr *multipart.Reader, tmp io.Writer) (*upload, error) {
	up := &upload{}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return up, nil
		}
		if err != nil {
			return nil, err
		}
		switch part.FormName() {
		case "purpose":
			b, err := io.ReadAll(io.LimitReader(part, 256))
			if err != nil {
				return nil, err
			}
			up.purpose = strings.TrimSpace(string(b))
		case "file":
			up.filename = part.FileName()
			if up.filename == "" {
				up.filename = "upload.jsonl"
			}
			if up.check, err = validate(io.TeeReader(part, tmp), s.Models); err != nil {
				return nil, err
			}
		default:
			io.Copy(io.Discard, part)
		}
		part.Close()
	}
}

// uploadFailed answers an upload that could not be read.
func uploadFailed(w http.ResponseWriter, err error, limit int64) {
	var tooBig *http.MaxBytesError
	var long errLineTooLong
	switch {
	case errors.As(err, &tooBig):
		httpx.WriteError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "file_too_large", "file",
			fmt.Sprintf("The upload exceeds the limit of %d bytes.", limit))
	case errors.As(err, &long):
		httpx.WriteError(w, http.StatusBadRequest, "invalid_request_error", "line_too_long", "file", err.Error())
	default:
		httpx.WriteError(w, http.StatusBadRequest, "invalid_request_error", "", "file", "Could not read the upload: "+err.Error())
	}
}

// loadFile reads the file named in the path as its tenant sees it; it has answered
// when it returns nil.
func (s *Service) loadFile(w http.ResponseWriter, r *http.Request) *fileRecord {
	id := r.PathValue("id")
	f, err := s.fileByID(r.Context(), id)
	if errors.Is(err, errNoFile) || err == nil && f.Tenant != httpx.Tenant(r) {
		httpx.WriteError(w, http.StatusNotFound, "invalid_request_error", "file_not_found", "id", fmt.Sprintf("No such file: %q.", id))
		return nil
	}
	if err != nil {
		httpx.WriteError(w, http.StatusServiceUnavailable, "server_error", "", "", "Reading the file failed.")
		return nil
	}
	return f
}

// getFile is GET /v1/files/{id}.
func (s *Service) getFile(w http.ResponseWriter, r *http.Request) {
	if f := s.loadFile(w, r); f != nil {
		httpx.WriteJSON(w, http.StatusOK, f.view())
	}
}

// fileContent is GET /v1/files/{id}/content: the file's bytes, streamed.
func (s *Service) fileContent(w http.ResponseWriter, r *http.Request) {
	f := s.loadFile(w, r)
	if f == nil {
		return
	}
	rc, err := s.openFile(r.Context(), f.ID)
	if err != nil {
		httpx.WriteError(w, http.StatusServiceUnavailable, "server_error", "", "", "The file's content is unavailable.")
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(f.Bytes, 10))
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": f.Filename}))
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, rc); err != nil {
		s.Log.Warn("batch: sending file content", "file", f.ID, "err", err)
	}
}

// deleteFile is DELETE /v1/files/{id}.
func (s *Service) deleteFile(w http.ResponseWriter, r *http.Request) {
	f := s.loadFile(w, r)
	if f == nil {
		return
	}
	ctx := r.Context()
	obs, err := s.objects(ctx)
	if err == nil {
		err = obs.Delete(ctx, f.ID)
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			err = nil
		}
	}
	if err == nil {
		_, err = s.Store.R.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, s.Store.K.File(f.ID))
			p.ZRem(ctx, s.Store.K.TenantFiles(f.Tenant), f.ID)
			return nil
		})
	}
	if err != nil {
		httpx.WriteError(w, http.StatusServiceUnavailable, "server_error", "", "", "Deleting the file failed; try again.")
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"id": f.ID, "object": "file", "deleted": true})
}

// listFiles is GET /v1/files: the tenant's files, newest first unless order=asc,
// optionally of one purpose, paged with limit (default and most 10,000) and after.
func (s *Service) listFiles(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, ok := listLimit(w, q.Get("limit"), 10_000, 10_000)
	if !ok {
		return
	}
	purpose := q.Get("purpose")
	files, more, err := page(r.Context(), s, s.Store.K.TenantFiles(httpx.Tenant(r)), q.Get("after"), limit, q.Get("order") == "asc",
		func(ctx context.Context, id string) (*fileRecord, bool, error) {
			f, err := s.fileByID(ctx, id)
			if errors.Is(err, errNoFile) {
				return nil, false, nil
			}
			return f, err == nil && (purpose == "" || f.Purpose == purpose), err
		})
	if err != nil {
		httpx.WriteError(w, http.StatusServiceUnavailable, "server_error", "", "", "Listing files failed.")
		return
	}
	views := make([]fileView, len(files))
	for i, f := range files {
		views[i] = f.view()
	}
	httpx.WriteJSON(w, http.StatusOK, listOf(views, func(v fileView) string { return v.ID }, more))
}
