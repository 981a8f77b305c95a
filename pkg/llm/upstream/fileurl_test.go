package upstream

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	llmanthropic "github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/gemini"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	llmresponses "github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

const reportURL = "https://files.example.com/letters/2024ltr.pdf"

// sdkJSON is v as its SDK puts it on the wire.
func sdkJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// onlyFile is the one file part of r's first message.
func onlyFile(t *testing.T, r *wire.Request) wire.File {
	t.Helper()
	for _, p := range r.Messages[0].Parts {
		if p.Kind == wire.PartFile {
			f := *p.File
			f.Param = ""
			return f
		}
	}
	t.Fatalf("no file part in %+v", r.Messages[0].Parts)
	return wire.File{}
}

// A file given by URL decodes, unread, into a file with that URL: a Responses
// input_file with file_url (openai-go ResponseInputFileParam) and an Anthropic
// document with a url source (anthropic-sdk-go URLPDFSourceParam, a PDF whatever its
// URL's name). Its name is the client's, else the URL's last path element.
func TestDecodeFileURL(t *testing.T) {
	respFile := sdkJSON(t, responses.ResponseInputFileParam{FileURL: openai.String(reportURL)})
	respNamed := sdkJSON(t, responses.ResponseInputFileParam{FileURL: openai.String("https://files.example.com/notes"), Filename: openai.String("notes.txt")})
	doc := sdkJSON(t, anthropic.DocumentBlockParam{Source: anthropic.DocumentBlockParamSourceUnion{OfURL: &anthropic.URLPDFSourceParam{URL: "https://arxiv.example/pdf/2401.1"}},
		Title: anthropic.String("The paper")})
	for _, c := range []struct {
		name  string
		codec wire.ClientCodec
		body  string
		want  wire.File
	}{
		{"responses file_url", llmresponses.Client, `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"t"},` + respFile + `]}]}`,
			wire.File{Filename: "2024ltr.pdf", MediaType: "application/pdf", URL: reportURL}},
		{"responses file_url named", llmresponses.Client, `{"model":"m","input":[{"role":"user","content":[` + respNamed + `]}]}`,
			wire.File{Filename: "notes.txt", MediaType: "text/plain", URL: "https://files.example.com/notes"}},
		{"anthropic url document", llmanthropic.Client, `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[` + doc + `]}]}`,
			wire.File{Filename: "The paper", MediaType: "application/pdf", URL: "https://arxiv.example/pdf/2401.1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := c.codec.DecodeRequest([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := onlyFile(t, r); got != c.want {
				t.Fatalf("file %+v, want %+v", got, c.want)
			}
		})
	}
}

// A file URL that is not an absolute http(s) URL, or that carries credentials, is a
// 400 naming the parameter, at decoding.
func TestDecodeFileURLRefused(t *testing.T) {
	for _, c := range []struct {
		codec       wire.ClientCodec
		body, param string
	}{
		{llmresponses.Client, `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_url":"ftp://files.example.com/a.pdf"}]}]}`, "input[0].content[0].file_url"},
		{llmresponses.Client, `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_url":"/a.pdf"}]}]}`, "input[0].content[0].file_url"},
		{llmresponses.Client, `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_url":"https://alice:hunter2@files.example.com/a.pdf"}]}]}`, "input[0].content[0].file_url"},
		{llmanthropic.Client, `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"file:///etc/passwd"}}]}]}`, "messages.0.content.0.source.url"},
		{llmanthropic.Client, `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url"}}]}]}`, "messages.0.content.0.source.url"},
	} {
		_, err := c.codec.DecodeRequest([]byte(c.body))
		e := wire.AsError(err)
		if e == nil || e.Status != 400 || e.Param != c.param || strings.Contains(e.Message, "hunter2") {
			t.Errorf("%s: %+v, want a 400 on %s", c.body, e, c.param)
		}
	}
}

// urlConversation is a user turn with a question and one file given by URL.
func urlConversation(t *testing.T, codec wire.ClientCodec, body string) *wire.Request {
	t.Helper()
	r, err := codec.DecodeRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A PDF given by URL reaches a Responses model as input_file.file_url and an
// Anthropic model as a document with a url source, unread; every other model, and
// those two for a file they take only as text, cannot take it until the ingress read
// it (ModelFiles: a 400 naming the model).
func TestEncodeFileURLForEachModel(t *testing.T) {
	pdfBody := `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"Title?"},{"type":"input_file","file_url":"` + reportURL + `"}]}]}`
	textBody := `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"Title?"},{"type":"input_file","file_url":"https://files.example.com/notes.txt"}]}]}`
	for _, c := range []struct {
		name string
		api  wire.ModelAPI
		want string
	}{
		{"responses", llmresponses.Model, sdkJSON(t, responses.ResponseInputFileParam{FileURL: openai.String(reportURL)})},
		{"anthropic", llmanthropic.Model, `"source":{"type":"url","url":"` + reportURL + `"}`},
		{"chat", openaichat.Model, ""}, {"gemini", gemini.Model, ""}, {"kimi", openaichat.Kimi, ""}, {"glm", openaichat.GLM, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			body, err := c.api.EncodeRequest(urlConversation(t, llmresponses.Client, pdfBody), "upstream")
			if c.want == "" {
				if e := wire.AsError(err); e == nil || e.Status != 400 || !strings.Contains(e.Message, `"upstream"`) || !strings.Contains(e.Message, "2024ltr.pdf") {
					t.Fatalf("a PDF by URL: %s %v, want a 400 naming the model and the file", body, err)
				}
			} else if err != nil || !strings.Contains(string(body), c.want) || strings.Contains(string(body), "file_data") {
				t.Fatalf("%s %v\nholds no %s", body, err, c.want)
			}
			if _, err := c.api.EncodeRequest(urlConversation(t, llmresponses.Client, textBody), "upstream"); err == nil || !strings.Contains(err.Error(), "notes.txt") {
				t.Errorf("a text file by URL, unread: %v, want an error", err)
			}
		})
	}
	// The Anthropic document's source reads back as the SDK's URL source.
	body, _ := llmanthropic.Model.EncodeRequest(urlConversation(t, llmresponses.Client, pdfBody), "upstream")
	var sent anthropic.MessageNewParams
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatal(err)
	}
	if d := sent.Messages[0].Content[1].OfDocument; d == nil || d.Source.OfURL == nil || d.Source.OfURL.URL != reportURL {
		t.Fatalf("%s: no document with a url source", body)
	}
}

// ReadFileURLs reads exactly the files a model cannot take by URL, once each, and
// turns them into files with data that ModelFiles then passes as they are or as text;
// a URL that cannot be read is a 400 naming the parameter and saying why.
func TestReadFileURLs(t *testing.T) {
	pdf, _ := base64.StdEncoding.DecodeString(titledPDF)
	content := map[string][]byte{reportURL: pdf, "https://files.example.com/notes.txt": []byte("The code is 0451.")}
	body := `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"Title?"},` +
		`{"type":"input_file","file_url":"` + reportURL + `"},{"type":"input_file","file_url":"https://files.example.com/notes.txt"}]}]}`
	for _, c := range []struct {
		name   string
		api    wire.ModelAPI
		read   []string // the URLs read
		native string   // what the model's request holds for the PDF
	}{
		{"responses", llmresponses.Model, []string{"https://files.example.com/notes.txt"}, `"file_url":"` + reportURL + `"`},
		{"anthropic", llmanthropic.Model, []string{"https://files.example.com/notes.txt"}, `"url":"` + reportURL + `"`},
		{"chat", openaichat.Model, []string{reportURL, "https://files.example.com/notes.txt"}, `"file_data":"data:application/pdf;base64,` + titledPDF + `"`},
		{"gemini", gemini.Model, []string{reportURL, "https://files.example.com/notes.txt"}, `"mimeType":"application/pdf"`},
		{"kimi", openaichat.Kimi, []string{reportURL, "https://files.example.com/notes.txt"}, `Title: Files Fixture`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := urlConversation(t, llmresponses.Client, body)
			var read []string
			out, err := wire.ReadFileURLs(r, c.api, func(url string) ([]byte, string, error) {
				read = append(read, url)
				return content[url], "application/octet-stream", nil // the server names no useful type
			})
			if err != nil || strings.Join(read, " ") != strings.Join(c.read, " ") {
				t.Fatalf("read %q, want %q: %v", read, c.read, err)
			}
			if r.Messages[0].Parts[1].File.Data != "" || r.Messages[0].Parts[2].File.Data != "" {
				t.Fatal("the request was changed")
			}
			if f := out.Messages[0].Parts[2].File; f.URL != "" || f.MediaType != "text/plain" || f.Filename != "notes.txt" {
				t.Fatalf("the text file read: %+v", f)
			}
			b, err := c.api.EncodeRequest(out, "upstream")
			if err != nil || !strings.Contains(string(b), c.native) || !strings.Contains(string(b), "The code is 0451.") {
				t.Fatalf("%s %v\nwant %s and the text file inlined", b, err, c.native)
			}
		})
	}
	_, err := wire.ReadFileURLs(urlConversation(t, llmresponses.Client, body), gemini.Model, func(string) ([]byte, string, error) {
		return nil, "", errors.New("the server answered HTTP 404")
	})
	e := wire.AsError(err)
	if e == nil || e.Status != 400 || e.Param != "input[0].content[1].file_url" || !strings.Contains(e.Message, "HTTP 404") || !strings.Contains(e.Message, reportURL) {
		t.Fatalf("%+v", e)
	}
}

// A file by URL survives the job's stored form, unread.
func TestStoredFileURLPart(t *testing.T) {
	r := urlConversation(t, llmresponses.Client, `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_url":"`+reportURL+`"}]}]}`)
	b, err := wire.EncodeStored(wire.OpenAIResponses, r)
	if err != nil {
		t.Fatal(err)
	}
	s, err := wire.DecodeStored(b)
	if err != nil || onlyFile(t, s.Request) != onlyFile(t, r) {
		t.Fatalf("%s %v", b, err)
	}
}
