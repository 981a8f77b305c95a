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

// textMedia are the media types, besides text/*, whose content is read as text.
var textMedia = map[string]bool{"application/json": true, "application/xml": true, "application/yaml": true,
	"application/x-yaml": true, "application/csv": true, "application/x-ndjson": true, "application/javascript": true}

// inlineFile reads a Responses input_file part. The fleet hands a model a file as
// text: a text file (by its media type or name, and UTF-8 content) becomes a text part
// holding the file between <file> delimiters, and so does the text of a PDF (pdfText);
// any other file, or a PDF without text to read, is refused, naming the model. file_id parts are resolved into file_data by the ingress (ResolveResponsesInput)
// before decoding; file_url is not fetched.
func inlineFile(param, model, filename, data, fileURL, fileID string) (Part, error) {
	switch {
	case data != "":
	case fileID != "":
		return Part{}, Invalid(param+".file_id", "%s.file_id %q is not one of this tenant's files", param, clip(fileID, 64))
	case fileURL != "":
		return Part{}, Invalid(param+".file_url", "%s: input_file.file_url is not supported by this server; send the file as file_data, or upload it (POST /v1/files) and send its file_id", param)
	default:
		return Part{}, Invalid(param, "%s: input_file needs file_data or file_id", param)
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
	if media == "" {
		media = mime.TypeByExtension(strings.ToLower(path.Ext(filename)))
	}
	media, _, _ = mime.ParseMediaType(media)
	name := filename
	if name == "" {
		name = "file"
	}
	if isPDF(media, filename, content) {
		text, ok := pdfText(content)
		if !ok {
			return Part{}, Invalid(param, "The model %q cannot read the file %q (application/pdf): this server passes files to its models as text, and this PDF has no text it can read (a scanned or encrypted PDF, or one drawn with embedded CID fonts).",
				clip(model, 64), clip(name, 128))
		}
		return Part{Kind: PartText, Text: fmt.Sprintf("<file name=%q type=\"application/pdf\">\n%s\n</file>", clip(name, 128), text)}, nil
	}
	if !isText(media, filename, content) {
		what := media
		if what == "" {
			what = "a binary file"
		}
		return Part{}, Invalid(param, "The model %q cannot read the file %q (%s): this server passes files to its models as text, and reads text files and the text of PDF files only.",
			clip(model, 64), clip(name, 128), what)
	}
	return Part{Kind: PartText, Text: fmt.Sprintf("<file name=%q>\n%s\n</file>", clip(name, 128), content)}, nil
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
	return media == ""
}
