package wire

import (
	"encoding/base64"
	"strings"
	"testing"
)

// titledPDF is a one-page PDF showing "Title: Files Fixture", base64.
var titledPDF = base64.StdEncoding.EncodeToString(onePagePDF("BT (Title: Files Fixture) Tj ET", true))

// Each client protocol's file shape decodes into a file part: Responses input_file,
// Chat file parts (openai-go ChatCompletionContentPartFileParam), Anthropic document
// blocks with a base64 or a text source (anthropic-sdk-go Base64PDFSourceParam,
// PlainTextSourceParam).
func TestDecodeFileParts(t *testing.T) {
	pdf := &File{Filename: "fixture.pdf", MediaType: "application/pdf", Data: titledPDF}
	for _, c := range []struct {
		name  string
		codec ClientCodec
		body  string
		want  *File
	}{
		{"responses input_file", Responses, `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","filename":"fixture.pdf","file_data":"data:application/pdf;base64,` + titledPDF + `"}]}]}`, pdf},
		{"responses by content", Responses, `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_data":"` + titledPDF + `"}]}]}`,
			&File{MediaType: "application/pdf", Data: titledPDF}},
		{"chat file", Chat, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"t"},{"type":"file","file":{"filename":"fixture.pdf","file_data":"data:application/pdf;base64,` + titledPDF + `"}}]}]}`, pdf},
		{"anthropic base64 document", Anthropic, `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"document","title":"fixture.pdf","source":{"type":"base64","media_type":"application/pdf","data":"` + titledPDF + `"}}]}]}`, pdf},
		{"anthropic text document", Anthropic, `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"document","title":"note","source":{"type":"text","media_type":"text/plain","data":"hello"}}]}]}`,
			&File{Filename: "note", MediaType: "text/plain", Data: base64.StdEncoding.EncodeToString([]byte("hello"))}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := c.codec.DecodeRequest([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			var got *File
			for _, p := range r.Messages[0].Parts {
				if p.Kind == PartFile {
					got = p.File
				}
			}
			if got == nil || *got != *c.want {
				t.Fatalf("file part %+v, want %+v", got, c.want)
			}
		})
	}
	if _, err := Anthropic.DecodeRequest([]byte(`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"%%%"}}]}]}`)); AsError(err) == nil || AsError(err).Status != 400 {
		t.Errorf("a document that is not base64: %v", err)
	}
}

// fileConversation is a user turn with a question and one file.
func fileConversation(f *File) *Request {
	return &Request{Model: "client-model", Messages: []Message{{Role: RoleUser, Parts: []Part{{Kind: PartText, Text: "Title?"}, {Kind: PartFile, File: f}}}}}
}

// Each model protocol carries a PDF in its own shape where it takes files, and as its
// text where it does not (Kimi, GLM).
func TestEncodeFileForEachModel(t *testing.T) {
	pdf := &File{Filename: "fixture.pdf", MediaType: "application/pdf", Data: titledPDF}
	for _, c := range []struct {
		name string
		api  ModelAPI
		want string // what the request body must hold
	}{
		{"chat", ChatModel, `{"file":{"file_data":"data:application/pdf;base64,` + titledPDF + `","filename":"fixture.pdf"},"type":"file"}`},
		{"responses", ResponsesModel, `{"file_data":"data:application/pdf;base64,` + titledPDF + `","filename":"fixture.pdf","type":"input_file"}`},
		{"anthropic", AnthropicModel, `{"source":{"data":"` + titledPDF + `","media_type":"application/pdf","type":"base64"},"title":"fixture.pdf","type":"document"}`},
		{"gemini", GeminiModel, `{"inlineData":{"data":"` + titledPDF + `","mimeType":"application/pdf"}}`},
		{"kimi", KimiModel, `Title: Files Fixture`},
		{"glm", GLMModel, `Title: Files Fixture`},
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
			if native == strings.Contains(string(body), "Title: Files Fixture") || r.Messages[0].Parts[1].Kind != PartFile {
				t.Fatalf("native %v, body %s; the request was changed: %+v", native, body, r.Messages[0].Parts[1])
			}
		})
	}
}

// A text file reaches every model as text; a file a model can read neither as it is
// nor as text is an error naming the model and the file, the same the ingress gives
// at submission (ModelFiles).
func TestEncodeTextAndUnreadableFiles(t *testing.T) {
	note := &File{Filename: "note.txt", MediaType: "text/plain", Data: base64.StdEncoding.EncodeToString([]byte("The code is 0451."))}
	audio := &File{Filename: "note.wav", MediaType: "audio/wav", Data: base64.StdEncoding.EncodeToString([]byte("RIFF\x00\x00WAVE"))}
	for _, api := range []ModelAPI{ChatModel, ResponsesModel, AnthropicModel, GeminiModel, KimiModel, GLMModel} {
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
		e := AsError(err)
		if e == nil || e.Status != 400 || !strings.Contains(e.Message, `"upstream"`) || !strings.Contains(e.Message, "note.wav") {
			t.Errorf("%T: audio: %v", api, err)
		}
		if _, err := ModelFiles(fileConversation(audio), api, "client-model"); err == nil || !strings.Contains(err.Error(), `"client-model"`) {
			t.Errorf("%T: ModelFiles: %v", api, err)
		}
	}
}

// A file part survives the job's stored form.
func TestStoredFilePart(t *testing.T) {
	r := fileConversation(&File{Filename: "fixture.pdf", MediaType: "application/pdf", Data: titledPDF})
	b, err := EncodeStored(OpenAIResponses, r)
	if err != nil {
		t.Fatal(err)
	}
	s, err := DecodeStored(b)
	if err != nil || s.Request.Messages[0].Parts[1].File == nil || *s.Request.Messages[0].Parts[1].File != *r.Messages[0].Parts[1].File {
		t.Fatalf("%s %v", b, err)
	}
}
