package simulator

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

// Files reach a main model as its protocol carries them, and the simulator takes them
// as the real APIs do: it reads none of them (the script answers the text), but counts
// them in Stats, so a test sees how a file reached the model: "model_file" counts
// requests that carried a file in their protocol's own shape (Chat and Responses file
// parts with base64 file_data, an Anthropic document block with a base64 source, a
// Gemini inlineData part other than an image), "model_file_text" requests that held a
// file inlined as text (its <file name=…> delimiters), "model_file_url" requests that
// gave a file by its URL where the real API takes one (a Responses input_file with
// file_url, an Anthropic document with a url source): the simulator does not fetch
// it.

// countFiles counts the files of a model request to path.
func (st *stats) countFiles(path string, body []byte) {
	if !mayHoldFile(body) {
		return
	}
	var v any
	if json.Unmarshal(body, &v) != nil {
		return
	}
	native, byURL, text := false, false, false
	walkJSON(v, func(o map[string]any) {
		native = native || nativeFile(path, o)
		byURL = byURL || urlFile(path, o)
	}, func(s string) {
		text = text || strings.Contains(s, "<file name=")
	})
	if native {
		st.count("model_file", body, path)
	}
	if text {
		st.count("model_file_text", body, path)
	}
	if byURL {
		st.count("model_file_url", body, path)
	}
}

// fileMarks are the bytes a request body holds when it carries a file of any shape
// countFiles counts: the type or field names of a file part, or the text form's
// "<file name=" (its '<' may come escaped).
var fileMarks = [][]byte{[]byte(`"file"`), []byte(`input_file`), []byte(`"document"`), []byte(`inlineData`), []byte(`file name=`)}

// mayHoldFile reports whether body may carry a file: countFiles decodes only such
// bodies.
func mayHoldFile(body []byte) bool {
	return slices.ContainsFunc(fileMarks, func(m []byte) bool { return bytes.Contains(body, m) })
}

// urlFile reports whether o is a file given by URL in the shape of the protocol
// served at path, where that protocol has one.
func urlFile(path string, o map[string]any) bool {
	httpURL := func(v any) bool {
		s, _ := v.(string)
		return strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://")
	}
	switch {
	case strings.HasSuffix(path, "/responses"):
		return o["type"] == "input_file" && httpURL(o["file_url"])
	case strings.HasSuffix(path, "/messages"):
		src, _ := o["source"].(map[string]any)
		return o["type"] == "document" && src["type"] == "url" && httpURL(src["url"])
	}
	return false
}

// nativeFile reports whether o is a file in the shape of the protocol served at path.
func nativeFile(path string, o map[string]any) bool {
	dataURL := func(v any) bool {
		s, _ := v.(string)
		return strings.HasPrefix(s, "data:") && strings.Contains(s, ";base64,")
	}
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		return o["type"] == "file" && dataURL(jpath(o, "file", "file_data"))
	case strings.HasSuffix(path, "/responses"):
		return o["type"] == "input_file" && dataURL(o["file_data"])
	case strings.HasSuffix(path, "/messages"):
		return o["type"] == "document" && jpath(o, "source", "type") == "base64"
	case strings.HasPrefix(path, "/v1beta/models/"):
		media := jstr(jpath(o, "inlineData", "mimeType"))
		return media != "" && !strings.HasPrefix(media, "image/")
	}
	return false
}

// walkJSON calls object for every object and str for every string within v.
func walkJSON(v any, object func(map[string]any), str func(string)) {
	switch v := v.(type) {
	case map[string]any:
		object(v)
		for _, e := range v {
			walkJSON(e, object, str)
		}
	case []any:
		for _, e := range v {
			walkJSON(e, object, str)
		}
	case string:
		str(v)
	}
}
