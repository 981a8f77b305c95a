package upstream

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/gemini"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// titledPDF is a one-page PDF showing "Title: Files Fixture", base64.
var titledPDF = base64.StdEncoding.EncodeToString(onePagePDF("BT (Title: Files Fixture) Tj ET", true))

// Each client protocol's file shape decodes into a file part: Responses input_file,
// Chat file parts (openai-go ChatCompletionContentPartFileParam), Anthropic document
// blocks with a base64 or a text source (anthropic-sdk-go Base64PDFSourceParam,
// PlainTextSourceParam).
func TestDecodeFileParts(t *testing.T) {
	pdf := &wire.File{Filename: "fixture.pdf", MediaType: "application/pdf", Data: titledPDF}
	for _, c := range []struct {
		name  string
		codec wire.ClientCodec
		body  string
		want  *wire.File
	}{
		{"responses input_file", responses.Client, `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","filename":"fixture.pdf","file_data":"data:application/pdf;base64,` + titledPDF + `"}]}]}`, pdf},
		{"responses by content", responses.Client, `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_data":"` + titledPDF + `"}]}]}`,
			&wire.File{MediaType: "application/pdf", Data: titledPDF}},
		{"chat file", openaichat.Client, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"t"},{"type":"file","file":{"filename":"fixture.pdf","file_data":"data:application/pdf;base64,` + titledPDF + `"}}]}]}`, pdf},
		{"anthropic base64 document", anthropic.Client, `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"document","title":"fixture.pdf","source":{"type":"base64","media_type":"application/pdf","data":"` + titledPDF + `"}}]}]}`, pdf},
		{"anthropic text document", anthropic.Client, `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"document","title":"note","source":{"type":"text","media_type":"text/plain","data":"hello"}}]}]}`,
			&wire.File{Filename: "note", MediaType: "text/plain", Data: base64.StdEncoding.EncodeToString([]byte("hello"))}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := c.codec.DecodeRequest([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			var got *wire.File
			for _, p := range r.Messages[0].Parts {
				if p.Kind == wire.PartFile {
					got = p.File
				}
			}
			if got == nil || *got != *c.want {
				t.Fatalf("file part %+v, want %+v", got, c.want)
			}
		})
	}
	if _, err := anthropic.Client.DecodeRequest([]byte(`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"%%%"}}]}]}`)); wire.AsError(err) == nil || wire.AsError(err).Status != 400 {
		t.Errorf("a document that is not base64: %v", err)
	}
}

// fileConversation is a user turn with a question and one file.
func fileConversation(f *wire.File) *wire.Request {
	return &wire.Request{Model: "client-model", Messages: []wire.Message{{Role: wire.RoleUser, Parts: []wire.Part{{Kind: wire.PartText, Text: "Title?"}, {Kind: wire.PartFile, File: f}}}}}
}

// Each model protocol carries a PDF in its own shape where it takes files, and as its
// text where it does not (Kimi, GLM).
func TestEncodeFileForEachModel(t *testing.T) {
	pdf := &wire.File{Filename: "fixture.pdf", MediaType: "application/pdf", Data: titledPDF}
	for _, c := range []struct {
		name string
		api  wire.ModelAPI
		want string // what the request body must hold
	}{
		{"chat", openaichat.Model, `{"file":{"file_data":"data:application/pdf;base64,` + titledPDF + `","filename":"fixture.pdf"},"type":"file"}`},
		{"responses", responses.Model, `{"file_data":"data:application/pdf;base64,` + titledPDF + `","filename":"fixture.pdf","type":"input_file"}`},
		{"anthropic", anthropic.Model, `{"source":{"data":"` + titledPDF + `","media_type":"application/pdf","type":"base64"},"title":"fixture.pdf","type":"document"}`},
		{"gemini", gemini.Model, `{"inlineData":{"data":"` + titledPDF + `","mimeType":"application/pdf"}}`},
		{"kimi", openaichat.Kimi, `Title: Files Fixture`},
		{"glm", openaichat.GLM, `Title: Files Fixture`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := fileConversation(pdf)
			body, err := c.api.EncodeRequest(r, "upstream")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(body), c.want) {
				t.Fatalf("%s\nholds no %s", body, c.want)
			}
			native := c.api.TakesFile("application/pdf")
			if native == strings.Contains(string(body), "Title: Files Fixture") || r.Messages[0].Parts[1].Kind != wire.PartFile {
				t.Fatalf("native %v, body %s; the request was changed: %+v", native, body, r.Messages[0].Parts[1])
			}
		})
	}
}

// A text file reaches every model as text; a file a model can read neither as it is
// nor as text is an error naming the model and the file, the same the ingress gives
// at submission (ModelFiles).
func TestEncodeTextAndUnreadableFiles(t *testing.T) {
	note := &wire.File{Filename: "note.txt", MediaType: "text/plain", Data: base64.StdEncoding.EncodeToString([]byte("The code is 0451."))}
	audio := &wire.File{Filename: "note.wav", MediaType: "audio/wav", Data: base64.StdEncoding.EncodeToString([]byte("RIFF\x00\x00WAVE"))}
	for _, api := range []wire.ModelAPI{openaichat.Model, responses.Model, anthropic.Model, gemini.Model, openaichat.Kimi, openaichat.GLM} {
		body, err := api.EncodeRequest(fileConversation(note), "upstream")
		if err != nil || !strings.Contains(string(body), "The code is 0451.") {
			t.Errorf("%T: a text file: %s %v", api, body, err)
		}
		body, err = api.EncodeRequest(fileConversation(audio), "upstream")
		if api.TakesFile("audio/wav") {
			if err != nil || !strings.Contains(string(body), `"mimeType":"audio/wav"`) {
				t.Errorf("%T: audio: %s %v", api, body, err)
			}
			continue
		}
		e := wire.AsError(err)
		if e == nil || e.Status != 400 || !strings.Contains(e.Message, `"upstream"`) || !strings.Contains(e.Message, "note.wav") {
			t.Errorf("%T: audio: %v", api, err)
		}
		if _, err := wire.ModelFiles(fileConversation(audio), api, "client-model"); err == nil || !strings.Contains(err.Error(), `"client-model"`) {
			t.Errorf("%T: ModelFiles: %v", api, err)
		}
	}
}

// A file part survives the job's stored form.
func TestStoredFilePart(t *testing.T) {
	r := fileConversation(&wire.File{Filename: "fixture.pdf", MediaType: "application/pdf", Data: titledPDF})
	b, err := wire.EncodeStored(wire.OpenAIResponses, r)
	if err != nil {
		t.Fatal(err)
	}
	s, err := wire.DecodeStored(b)
	if err != nil || s.Request.Messages[0].Parts[1].File == nil || *s.Request.Messages[0].Parts[1].File != *r.Messages[0].Parts[1].File {
		t.Fatalf("%s %v", b, err)
	}
}

// onePagePDF is a minimal PDF whose one page shows lines with the content operators
// given, compressed with FlateDecode when flate is set.
func onePagePDF(content string, flate bool) []byte {
	stream, filter := []byte(content), ""
	if flate {
		var b bytes.Buffer
		w := zlib.NewWriter(&b)
		w.Write(stream)
		w.Close()
		stream, filter = b.Bytes(), " /Filter /FlateDecode"
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n2 0 obj\n<< /Type /Pages /Kids [3 0 R] /Count 1 >>\nendobj\n")
	fmt.Fprintf(&b, "3 0 obj\n<< /Type /Page /Parent 2 0 R /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>\nendobj\n")
	fmt.Fprintf(&b, "4 0 obj\n<< /Length %d%s >>\nstream\n", len(stream), filter)
	b.Write(stream)
	fmt.Fprintf(&b, "\nendstream\nendobj\n5 0 obj\n<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%%%EOF")
	return b.Bytes()
}
