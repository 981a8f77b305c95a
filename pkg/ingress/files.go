package ingress

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"

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
	v := fileView{ID: f.ID, Object: "file", Bytes: f.Bytes, CreatedAt: f.Created.Unix(), Filename: f.Filename, Purpose: f.Purpose, Status: "processed"}
	if !f.Expires.IsZero() {
		at := f.Expires.Unix()
		v.ExpiresAt = &at
	}
	return v
}

// uploadFile is POST /v1/files (multipart: purpose, file, and optionally OpenAI's
// expires_after[anchor]=created_at and expires_after[seconds]=N). A batch input file
// is validated line by line as it streams into the file store; an invalid one is
// refused with every problem's line number and nothing is kept. A file without
// expires_after expires after FLEET_FILE_EXPIRY.
func (s *Server) uploadFile(w http.ResponseWriter, r *http.Request) {
	limit := s.Batches.MaxUploadBytes()
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "", "Send the file as multipart/form-data with the fields 'purpose' and 'file'.")
		return
	}
	up, err := s.readUpload(r, mr)
	if up != nil && up.file != nil {
		// Stored but not recorded: dropped unless it is recorded below.
		defer func() {
			if up.file != nil {
				s.Batches.DiscardUpload(r.Context(), up.file)
			}
		}()
	}
	if err != nil {
		uploadFailed(w, err, limit)
		return
	}
	expires, msg := up.expiry()
	switch {
	case msg != "":
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "expires_after", msg)
		return
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
	f := up.file
	up.file = nil // recorded, or dropped by RecordUpload
	if err := s.Batches.RecordUpload(r.Context(), f, expires); err != nil {
		writeBatchError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, fileViewOf(f))
}

// upload is what a multipart upload carried.
type upload struct {
	purpose  string
	filename string
	// check is the file's validation (nil: no file part); file the stored file when
	// it is valid.
	check *batch.Validation
	file  *state.File
	// anchor and seconds are the expires_after fields, as sent.
	anchor, seconds string
}

// expiry reads expires_after: how long after its creation the file expires (0: the
// default), or why it cannot.
func (up *upload) expiry() (time.Duration, string) {
	if up.anchor == "" && up.seconds == "" {
		return 0, ""
	}
	if up.anchor != "created_at" {
		return 0, `expires_after[anchor] must be "created_at"`
	}
	n, err := strconv.Atoi(up.seconds)
	if err != nil || n < 1 || time.Duration(n)*time.Second > batch.MaxExpiresAfter {
		return 0, fmt.Sprintf("expires_after[seconds] must be a whole number of seconds from 1 to %d", int(batch.MaxExpiresAfter.Seconds()))
	}
	return time.Duration(n) * time.Second, ""
}

// errTwoFiles refuses an upload with more than one 'file' part.
var errTwoFiles = errors.New("the upload has more than one 'file' part; send exactly one")

// readUpload reads the parts of an upload, storing the file while it is validated
// (the SDKs send the file before the purpose, so every file is validated as a batch
// input; other purposes are refused afterwards). The stored file is in up.file, even
// when an error follows.
func (s *Server) readUpload(r *http.Request, mr *multipart.Reader) (*upload, error) {
	up := &upload{}
	fields := map[string]*string{"purpose": &up.purpose, "expires_after[anchor]": &up.anchor, "expires_after[seconds]": &up.seconds}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return up, nil
		}
		if err != nil {
			return up, err
		}
		switch field := fields[part.FormName()]; {
		case field != nil:
			b, err := io.ReadAll(io.LimitReader(part, 256))
			if *field = strings.TrimSpace(string(b)); err != nil {
				return up, err
			}
		case part.FormName() == "file":
			if up.check != nil {
				// Only the first file part would be validated but every part's bytes
				// land in tmp: a second one is refused, not stored unchecked.
				return up, errTwoFiles
			}
			up.filename = part.FileName()
			if up.filename == "" {
				up.filename = "upload.jsonl"
			}
			if up.file, up.check, err = s.Batches.StoreUpload(r.Context(), tenantOf(r), up.filename, part); err != nil {
				return up, err
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
	if _, ok := errors.AsType[*batch.Error](err); ok {
		writeBatchError(w, err)
		return
	}
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
func (s *Server) getFile(w http.ResponseWriter, r *http.Request, f *state.File) {
	writeJSON(w, http.StatusOK, fileViewOf(f))
}

// fileContent is GET /v1/files/{id}/content: the file's bytes, streamed.
func (s *Server) fileContent(w http.ResponseWriter, r *http.Request, f *state.File) {
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
func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request, f *state.File) {
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
	limit, ok := countParam(w, q, "limit", 10_000, 10_000)
	if !ok {
		return
	}
	files, more, err := s.Batches.Files(r.Context(), tenantOf(r), q.Get("purpose"), q.Get("after"), q.Get("order") == "asc", limit)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "", "Listing files failed.")
		return
	}
	writeJSON(w, http.StatusOK, listOf(mapped(files, fileViewOf), func(v fileView) string { return v.ID }, more))
}
