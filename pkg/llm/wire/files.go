package wire

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"mime"
	"path"
	"strings"
	"unicode/utf8"
)

// File is a document a client sent (PartFile): its name, media type and base64
// content. A model takes it as it is where its protocol carries that kind of file
// (TakesFile), else as text where it is text (fileText).
type File struct {
	Filename  string `json:"filename,omitempty"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data"`
}

// mediaPDF is the media type every protocol that takes files takes.
const mediaPDF = "application/pdf"

// textMedia are the media types, besides text/*, whose content is read as text.
var textMedia = map[string]bool{"application/json": true, "application/xml": true, "application/yaml": true,
	"application/x-yaml": true, "application/csv": true, "application/x-ndjson": true, "application/javascript": true}

// decodeFile reads a client's file (Responses input_file, Chat file part): data is
// base64 or a base64 data: URL. file_id parts are resolved into file_data by the
// ingress (ResolveResponsesInput) before decoding; file_url is not fetched.
func decodeFile(param, filename, data, fileURL, fileID string) (Part, error) {
	switch {
	case data != "":
	case fileID != "":
		return Part{}, Invalid(param+".file_id", "%s.file_id %q is not one of this tenant's files", param, clip(fileID, 64))
	case fileURL != "":
		return Part{}, Invalid(param+".file_url", "%s: file_url is not supported by this server; send the file as file_data, or upload it (POST /v1/files) and send its file_id", param)
	default:
		return Part{}, Invalid(param, "%s: a file needs file_data or file_id", param)
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
	return Part{Kind: PartFile, File: &File{Filename: filename, MediaType: fileMedia(media, filename, content), Data: data}}, nil
}

// fileMedia is a file's media type: the one it came with, else its name's, else
// application/pdf or text/plain by its content, else application/octet-stream.
func fileMedia(media, filename string, content []byte) string {
	if media == "" {
		media = mime.TypeByExtension(strings.ToLower(path.Ext(filename)))
	}
	media, _, _ = mime.ParseMediaType(media)
	switch {
	case isPDF(media, filename, content):
		return mediaPDF
	case media != "":
		return media
	case isText("", filename, content):
		return "text/plain"
	}
	return "application/octet-stream"
}

// name is the file's name for a model or an error message.
func (f *File) name() string {
	if f.Filename == "" {
		return "file"
	}
	return clip(f.Filename, 128)
}

// dataURL is the file as a base64 data: URL (OpenAI's file_data).
func (f *File) dataURL() string { return "data:" + f.MediaType + ";base64," + f.Data }

// fileText returns a file as a model that cannot take it as it is reads it: a text
// file, or the text of a PDF (pdfText), between <file> delimiters. It fails, naming
// model and the file, for any other file and for a PDF without text to read.
func fileText(f *File, model string) (Part, error) {
	content, err := base64.StdEncoding.DecodeString(f.Data)
	if err != nil {
		return Part{}, Invalid("", "The file %q is not valid base64.", f.name())
	}
	if f.MediaType == mediaPDF {
		text, ok := pdfText(content)
		if !ok {
			return Part{}, Invalid("", "The model %q cannot read the file %q (application/pdf): it takes files as text, and this PDF has no text it can read (a scanned or encrypted PDF, or one drawn with embedded CID fonts).",
				clip(model, 64), f.name())
		}
		return Part{Kind: PartText, Text: fmt.Sprintf("<file name=%q type=\"application/pdf\">\n%s\n</file>", f.name(), text)}, nil
	}
	if !isText(f.MediaType, f.Filename, content) {
		return Part{}, Invalid("", "The model %q cannot read the file %q (%s): it takes this kind of file neither as it is nor as text; send a text file or a PDF, or use a model that reads it.",
			clip(model, 64), f.name(), f.MediaType)
	}
	return Part{Kind: PartText, Text: fmt.Sprintf("<file name=%q>\n%s\n</file>", f.name(), content)}, nil
}

// TakesFile reports whether api carries a file of the media type as it is: PDFs in
// OpenAI Chat and Responses and Anthropic Messages; PDFs, images, audio and video in
// Gemini. Kimi's and GLM's Chat APIs take none: files reach them as text.
func TakesFile(api ModelAPI, media string) bool {
	switch api.(type) {
	case chatModel, responsesModel, anthropicModel:
		return media == mediaPDF
	case geminiModel:
		kind, _, _ := strings.Cut(media, "/")
		return media == mediaPDF || kind == "image" || kind == "audio" || kind == "video"
	}
	return false
}

// ModelFiles returns r as api reads its files: those api takes as they are stay,
// the others become text (fileText). r itself is not changed. The error, a 400 naming
// model and the file, is for a file the model cannot read either way; the ingress
// checks a request with it before the job is queued.
func ModelFiles(r *Request, api ModelAPI, model string) (*Request, error) {
	var out *Request
	for i, m := range r.Messages {
		copied := false
		for j, p := range m.Parts {
			if p.Kind != PartFile || TakesFile(api, p.File.MediaType) {
				continue
			}
			text, err := fileText(p.File, model)
			if err != nil {
				return nil, err
			}
			if out == nil {
				c := *r
				c.Messages = append([]Message(nil), r.Messages...)
				out = &c
			}
			if !copied {
				out.Messages[i].Parts, copied = append([]Part(nil), m.Parts...), true
			}
			out.Messages[i].Parts[j] = text
		}
	}
	if out == nil {
		return r, nil
	}
	return out, nil
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
