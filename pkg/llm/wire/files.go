package wire

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"fmt"
	"mime"
	"net/url"
	"path"
	"strings"
	"unicode/utf8"
)

// File is a document a client sent (PartFile): its name, media type and base64
// content. A model takes it as it is where its protocol carries that kind of file
// (TakesFile), else as text where it is text (fileText).
//
// A file given by URL (a Responses input_file's file_url, an Anthropic document's url
// source) has URL and no Data: its media type is its name's ("" when the name says
// none). A model that takes that kind of file by URL gets the URL (TakesFileURL); for
// any other the ingress reads the file once, at submission (ReadFileURLs), and it
// becomes a file with Data.
type File struct {
	Filename  string `json:"filename,omitempty"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data"`
	URL       string `json:"url,omitempty"`
	// Param is the request parameter that gave URL, for the error that it cannot be
	// read (not stored).
	Param string `json:"-"`
}

// MediaPDF is the media type every protocol that takes files takes.
const MediaPDF = "application/pdf"

// textMedia are the media types, besides text/*, whose content is read as text.
var textMedia = map[string]bool{"application/json": true, "application/xml": true, "application/yaml": true,
	"application/x-yaml": true, "application/csv": true, "application/x-ndjson": true, "application/javascript": true}

// DecodeFile reads a client's file (Responses input_file, Chat file part): data is
// base64 or a base64 data: URL. file_id parts are resolved into file_data by the
// ingress (ResolveResponsesInput) before decoding; a file_url is kept as the file's
// URL (urlFile), not read.
func DecodeFile(param, filename, data, fileURL, fileID string) (Part, error) {
	switch {
	case data != "":
	case fileID != "":
		return Part{}, Invalid(param+".file_id", "%s.file_id %q is not one of this tenant's files", param, Clip(fileID, 64))
	case fileURL != "":
		return URLFile(param+".file_url", filename, fileURL)
	default:
		return Part{}, Invalid(param, "%s: a file needs file_data, file_url or file_id", param)
	}
	media := ""
	if rest, ok := strings.CutPrefix(data, "data:"); ok {
		meta, payload, found := strings.Cut(rest, ",")
		if !found || !strings.HasSuffix(meta, ";base64") {
			return Part{}, Invalid(param+".file_data", "%s.file_data must be base64, or a base64 data: URL", param)
		}
		media, data = strings.TrimSuffix(meta, ";base64"), payload
	}
	content, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return Part{}, Invalid(param+".file_data", "%s.file_data is not valid base64", param)
	}
	return Part{Kind: PartFile, File: &File{Filename: filename, MediaType: FileMedia(media, filename, content), Data: data}}, nil
}

// FileMedia is a file's media type: the one it came with, else its name's, else
// application/pdf or text/plain by its content, else application/octet-stream.
func FileMedia(media, filename string, content []byte) string {
	if media == "" {
		media = mime.TypeByExtension(strings.ToLower(path.Ext(filename)))
	}
	media, _, _ = mime.ParseMediaType(media)
	switch {
	case isPDF(media, filename, content):
		return MediaPDF
	case media != "":
		return media
	case isText("", filename, content):
		return "text/plain"
	}
	return "application/octet-stream"
}

// Name is the file's name for a model or an error message.
func (f *File) Name() string {
	if f.Filename == "" {
		return "file"
	}
	return Clip(f.Filename, 128)
}

// DataURL is the file as a base64 data: URL (OpenAI's file_data).
func (f *File) DataURL() string { return "data:" + f.MediaType + ";base64," + f.Data }

// fileText returns a file as a model that cannot take it as it is reads it: a text
// file, or the text of a PDF (pdfText), between <file> delimiters. It fails, naming
// model and the file, for any other file and for a PDF without text to read.
func fileText(f *File, model string) (Part, error) {
	content, err := base64.StdEncoding.DecodeString(f.Data)
	if err != nil {
		return Part{}, Invalid("", "The file %q is not valid base64.", f.Name())
	}
	if f.MediaType == MediaPDF {
		text, ok := pdfText(content)
		if !ok {
			return Part{}, Invalid("", "The model %q cannot read the file %q (application/pdf): it takes files as text, and this PDF has no text it can read (a scanned or encrypted PDF, or one drawn with embedded CID fonts).",
				Clip(model, 64), f.Name())
		}
		return Part{Kind: PartText, Text: fmt.Sprintf("<file name=%q type=\"application/pdf\">\n%s\n</file>", f.Name(), text)}, nil
	}
	if !isText(f.MediaType, f.Filename, content) {
		return Part{}, Invalid("", "The model %q cannot read the file %q (%s): it takes this kind of file neither as it is nor as text; send a text file or a PDF, or use a model that reads it.",
			Clip(model, 64), f.Name(), f.MediaType)
	}
	return Part{Kind: PartText, Text: fmt.Sprintf("<file name=%q>\n%s\n</file>", f.Name(), content)}, nil
}

// URLFile is a file given by URL at param: an absolute http or https URL of at most
// maxFileURL bytes without a user name or password (the fleet reads it with none and
// a model provider would be given them). Its name is filename, else the URL path's
// last element; its media type is the name's.
func URLFile(param, filename, raw string) (Part, error) {
	raw = strings.TrimSpace(raw)
	if len(raw) > maxFileURL {
		return Part{}, Invalid(param, "%s is longer than %d bytes", param, maxFileURL)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || u.Hostname() == "" || u.Scheme != "http" && u.Scheme != "https" {
		return Part{}, Invalid(param, "%s must be an absolute http or https URL", param)
	}
	if u.User != nil {
		return Part{}, Invalid(param, "%s carries a user name or password (user:password@host); the fleet never sends credentials: give the URL without them", param)
	}
	if filename == "" {
		if base := path.Base(u.Path); base != "/" && base != "." {
			filename = Clip(base, 128)
		}
	}
	media, _, _ := mime.ParseMediaType(mime.TypeByExtension(strings.ToLower(path.Ext(filename))))
	if isPDF(media, filename, nil) {
		media = MediaPDF
	}
	return Part{Kind: PartFile, File: &File{Filename: filename, MediaType: media, URL: raw, Param: param}}, nil
}

// maxFileURL bounds a file's URL (pkg/fetch's MaxURLLen).
const maxFileURL = 2048

// ReadFileURLs returns r with the files given by URL that api does not take by URL
// (TakesFileURL) read by read, which returns the file's bytes and the media type its
// server named; the files api takes by URL, and r itself, are not changed. A file
// read is a file with Data, whose media type is the server's unless that is none or
// application/octet-stream (then its name's or its content's: fileMedia). The error,
// a 400 naming the parameter, the URL and read's reason, is for a URL that cannot be
// read; the ingress calls this once, at submission, before ModelFiles.
func ReadFileURLs(r *Request, api ModelAPI, read func(url string) ([]byte, string, error)) (*Request, error) {
	return mapFiles(r, func(f *File) (Part, bool, error) {
		if f.URL == "" || f.Data != "" || api.TakesFileURL(f.MediaType) {
			return Part{}, false, nil
		}
		content, media, err := read(f.URL)
		if err != nil {
			param := cmp.Or(f.Param, "file_url")
			return Part{}, false, Invalid(param, "%s: the file at %s could not be read: %s", param, Clip(f.URL, 256), err)
		}
		if media == "application/octet-stream" || media == "binary/octet-stream" {
			media = ""
		}
		return Part{Kind: PartFile, File: &File{Filename: f.Filename, MediaType: FileMedia(media, f.Filename, content),
			Data: base64.StdEncoding.EncodeToString(content)}}, true, nil
	})
}

// ModelFiles returns r as api reads its files: those api takes as they are stay,
// the others become text (fileText). r itself is not changed. The error, a 400 naming
// model and the file, is for a file the model cannot read either way, or a file by
// URL it cannot take by URL that was not read (ReadFileURLs); the ingress checks a
// request with it before the job is queued.
func ModelFiles(r *Request, api ModelAPI, model string) (*Request, error) {
	return mapFiles(r, func(f *File) (Part, bool, error) {
		if f.URL != "" && f.Data == "" {
			if api.TakesFileURL(f.MediaType) {
				return Part{}, false, nil
			}
			return Part{}, false, Invalid("", "The model %q cannot take the file %q by its URL, and the file was not read: send it as file_data.", Clip(model, 64), f.Name())
		}
		if api.TakesFile(f.MediaType) {
			return Part{}, false, nil
		}
		text, err := fileText(f, model)
		return text, err == nil, err
	})
}

// mapFiles returns r with each file part replaced by fn's part where fn says so
// (true), copying only the messages it changes; r itself is not changed.
func mapFiles(r *Request, fn func(f *File) (Part, bool, error)) (*Request, error) {
	var out *Request
	for i, m := range r.Messages {
		copied := false
		for j, p := range m.Parts {
			if p.Kind != PartFile {
				continue
			}
			np, replace, err := fn(p.File)
			if err != nil {
				return nil, err
			}
			if !replace {
				continue
			}
			if out == nil {
				c := *r
				c.Messages = append([]Message(nil), r.Messages...)
				out = &c
			}
			if !copied {
				out.Messages[i].Parts, copied = append([]Part(nil), m.Parts...), true
			}
			out.Messages[i].Parts[j] = np
		}
	}
	return cmp.Or(out, r), nil
}

// textNames are file name extensions of text files that mime does not know everywhere.
var textNames = map[string]bool{".md": true, ".markdown": true, ".txt": true, ".csv": true, ".tsv": true, ".json": true,
	".jsonl": true, ".yaml": true, ".yml": true, ".toml": true, ".log": true, ".go": true, ".py": true, ".rs": true, ".ts": true, ".sql": true}

// isText reports whether a file is text: UTF-8 without NUL bytes, with a text media
// type, a text file name, or neither.
func isText(media, filename string, content []byte) bool {
	if !utf8.Valid(content) || bytes.IndexByte(content, 0) >= 0 {
		return false
	}
	switch {
	case strings.HasPrefix(media, "text/"), textMedia[media], textNames[strings.ToLower(path.Ext(filename))]:
		return true
	}
	return media == "" || media == "text/plain"
}
