package api

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/batch"
	"github.com/searchfleet/searchfleet/pkg/state"
)

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

func fileViewOf(f *state.File) fileView {
	return fileView{ID: f.ID, Object: "file", Bytes: f.Bytes, CreatedAt: f.Created.Unix(), Filename: f.Filename, Purpose: f.Purpose, Status: "processed"}
}

// uploadFile is POST /v1/files (multipart: purpose, file). A batch input file is
// validated line by line as it streams in; an invalid one is refused with every
// problem's line number and nothing is stored.
func (s *Server) uploadFile(w http.ResponseWriter, r *http.Request) {
	limit := s.Batches.MaxUploadBytes()
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "", "Send the file as multipart/form-data with the fields 'purpose' and 'file'.")
		return
	}
	tmp, err := os.CreateTemp("", "searchfleet-upload-*")
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", "", "Could not buffer the upload.")
		return
	}
	defer func() { tmp.Close(); os.Remove(tmp.Name()) }()
	up, err := s.readUpload(mr, tmp)
	if err != nil {
		uploadFailed(w, err, limit)
		return
	}
	switch {
	case up.purpose != batch.PurposeBatch:
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "purpose", fmt.Sprintf("purpose %q is not supported; this server stores files with purpose \"batch\"", up.purpose))
		return
	case up.check == nil:
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "file", "The 'file' field is missing.")
		return
	case up.check.Invalid > 0:
		writeJSON(w, http.StatusBadRequest, up.check.AsInputError("file"))
		return
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", "", "Could not read back the upload.")
		return
	}
	f, err := s.Batches.Upload(r.Context(), tenantOf(r), up.filename, tmp)
	if err != nil {
		writeBatchError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, fileViewOf(f))
}

// upload is what a multipart upload carried.
type upload struct {
	purpose  string
	filename string
	// check is the file's validation (nil: no file part).
	check *batch.Validation
}

// errTwoFiles refuses an upload with more than one 'file' part.
var errTwoFiles = errors.New("the upload has more than one 'file' part; send exactly one")

// readUpload reads the parts of an upload, copying the file into tmp while it is
// validated (the SDKs send the file before the purpose, so every file is validated
// as a batch input; other purposes are refused afterwards).
func (s *Server) readUpload(mr *multipart.Reader, tmp io.Writer) (*upload, error) {
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
			if up.check != nil {
				// Only the first file part would be validated but every part's bytes
				// land in tmp: a second one is refused, not stored unchecked.
				return nil, errTwoFiles
			}
			up.filename = part.FileName()
			if up.filename == "" {
				up.filename = "upload.jsonl"
			}
			if up.check, err = s.Batches.Validate(io.TeeReader(part, tmp)); err != nil {
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
	var long batch.LineTooLongError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "file_too_large", "file",
			fmt.Sprintf("The upload exceeds the limit of %d bytes.", limit))
	case errors.Is(err, errTwoFiles):
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "file", "Could not read the upload: "+err.Error())
	case errors.As(err, &long):
		writeError(w, http.StatusBadRequest, "invalid_request_error", "line_too_long", "file", err.Error())
	default:
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "file", "Could not read the upload: "+bodyError(err))
	}
}

// loadFile reads the file named in the path as its tenant sees it; it has answered
// when it returns nil.
func (s *Server) loadFile(w http.ResponseWriter, r *http.Request) *state.File {
	f, err := s.Batches.File(r.Context(), tenantOf(r), r.PathValue("id"))
	if err != nil {
		writeBatchError(w, err)
		return nil
	}
	return f
}

// getFile is GET /v1/files/{id}.
func (s *Server) getFile(w http.ResponseWriter, r *http.Request) {
	if f := s.loadFile(w, r); f != nil {
		writeJSON(w, http.StatusOK, fileViewOf(f))
	}
}

// fileContent is GET /v1/files/{id}/content: the file's bytes, streamed.
func (s *Server) fileContent(w http.ResponseWriter, r *http.Request) {
	f := s.loadFile(w, r)
	if f == nil {
		return
	}
	rc, err := s.Batches.OpenFile(r.Context(), f.ID)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "", "The file's content is unavailable.")
		return
	}
	defer rc.Close()
	s.extendWrite(w)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(f.Bytes, 10))
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": f.Filename}))
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, rc); err != nil {
		s.Log.Warn("api: sending file content", "file", f.ID, "err", err)
	}
}

// deleteFile is DELETE /v1/files/{id}.
func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request) {
	f := s.loadFile(w, r)
	if f == nil {
		return
	}
	if err := s.Batches.DeleteFile(r.Context(), f); err != nil {
		writeBatchError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": f.ID, "object": "file", "deleted": true})
}

// listFiles is GET /v1/files: the tenant's files, newest first unless order=asc,
// optionally of one purpose, paged with limit (default and most 10,000) and after.
func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, ok := listLimit(w, q.Get("limit"), 10_000, 10_000)
	if !ok {
		return
	}
	files, more, err := s.Batches.Files(r.Context(), tenantOf(r), q.Get("purpose"), q.Get("after"), q.Get("order") == "asc", limit)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "", "Listing files failed.")
		return
	}
	views := make([]fileView, len(files))
	for i, f := range files {
		views[i] = fileViewOf(f)
	}
	writeJSON(w, http.StatusOK, listOf(views, func(v fileView) string { return v.ID }, more))
}
