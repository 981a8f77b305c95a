package api_test

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"strings"
	"testing"
)

// An upload with two 'file' parts is refused and nothing is stored: only one part
// could have been validated.
func TestUploadTwoFileParts(t *testing.T) {
	t.Parallel()
	h := batchAPI(t)
	good := `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m1","messages":[{"role":"user","content":"hi"}]}}` + "\n"
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", "bad.jsonl")
	fw.Write([]byte("not json at all\n"))
	fw, _ = mw.CreateFormFile("file", "good.jsonl")
	fw.Write([]byte(good))
	mw.WriteField("purpose", "batch")
	mw.Close()
	code, _, body := call(t, h, "POST", "/v1/files", mw.FormDataContentType(), &buf)
	if code != 400 || !strings.Contains(string(body), `"param":"file"`) {
		t.Errorf("two file parts: %d %s", code, body)
	}
	code, list := callJSON(t, h, "GET", "/v1/files", nil)
	var l struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(list, &l); code != 200 || err != nil || len(l.Data) != 0 {
		t.Errorf("files stored after a refused upload: %d %s", code, list)
	}
}
