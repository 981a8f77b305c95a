package fleet_test

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
)

// fileRequest is a Responses request to model with a question and one input_file.
func fileRequest(model, filename, dataURL string) map[string]any {
	return map[string]any{"model": model, "input": []any{map[string]any{"type": "message", "role": "user", "content": []any{
		map[string]any{"type": "input_text", "text": "Answer with the title of the attached file only. sim:nosearch"},
		map[string]any{"type": "input_file", "filename": filename, "file_data": dataURL},
	}}}}
}

// A PDF a Responses client sends reaches each model of the demo, one per model
// protocol: as the protocol's own file (Chat file part, Responses input_file,
// Anthropic document, Gemini inlineData) where it takes files, as its text for Kimi
// and GLM, whose Chat APIs take none.
func TestPDFFileReachesEachModelProtocol(t *testing.T) {
	f := fleettest.Start(t)
	status, body, _ := f.Do(t, "GET", "/v1/models", nil)
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if status != 200 || json.Unmarshal(body, &list) != nil {
		t.Fatalf("GET /v1/models: %d %s", status, body)
	}
	pdf := "data:application/pdf;base64," + titlePDF()
	for _, c := range []struct {
		model  string
		native bool
	}{
		{demo.Model, true}, {demo.ModelResponses, true}, {demo.ModelClaude, true}, {demo.ModelGemini, true},
		{demo.ModelKimiNative, false}, {demo.ModelGLMNative, false},
	} {
		t.Run(c.model, func(t *testing.T) {
			if !slices.ContainsFunc(list.Data, func(m struct {
				ID string `json:"id"`
			}) bool {
				return m.ID == c.model
			}) {
				t.Fatalf("GET /v1/models does not list %s", c.model)
			}
			before := f.Sim.Stats().Requests
			status, body, _ := f.Do(t, "POST", "/v1/responses", fileRequest(c.model, "fixture.pdf", pdf))
			var resp struct {
				Status string `json:"status"`
			}
			if status != 200 || json.Unmarshal(body, &resp) != nil || resp.Status != "completed" {
				t.Fatalf("%d %s", status, body)
			}
			after := f.Sim.Stats().Requests
			native, text := after["model_file"]-before["model_file"], after["model_file_text"]-before["model_file_text"]
			if c.native && (native == 0 || text != 0) {
				t.Errorf("the model saw the PDF natively in %d requests, as text in %d; want natively only", native, text)
			}
			if !c.native && (native != 0 || text == 0) {
				t.Errorf("the model saw the PDF natively in %d requests, as text in %d; want as text only", native, text)
			}
		})
	}
}

// A binary file that is not text reaches a model whose protocol takes it (Gemini:
// audio) as it is, and is refused at submission for the others: a 400 in the client's
// protocol naming the model and the file, with no job and no model call.
func TestBinaryFileRefusedAtSubmission(t *testing.T) {
	f := fleettest.Start(t)
	wav := "data:audio/wav;base64," + base64.StdEncoding.EncodeToString([]byte("RIFF\x24\x00\x00\x00WAVEfmt \x10\x00"))
	before := f.Sim.Stats().Requests["model_file"]
	status, body, _ := f.Do(t, "POST", "/v1/responses", fileRequest(demo.ModelGemini, "note.wav", wav))
	if status != 200 || f.Sim.Stats().Requests["model_file"]-before != 1 {
		t.Fatalf("Gemini did not get the audio file as it is: %d %s", status, body)
	}
	for _, model := range []string{demo.Model, demo.ModelResponses, demo.ModelClaude, demo.ModelKimiNative} {
		t.Run(model, func(t *testing.T) {
			before := f.Sim.Stats().Requests["model"]
			status, body, _ := f.Do(t, "POST", "/v1/responses", fileRequest(model, "note.wav", wav))
			var e struct {
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if status != 400 || json.Unmarshal(body, &e) != nil || e.Error.Type != "invalid_request_error" ||
				!strings.Contains(e.Error.Message, `"`+model+`"`) || !strings.Contains(e.Error.Message, "note.wav") {
				t.Fatalf("%d %s", status, body)
			}
			if n := f.Sim.Stats().Requests["model"] - before; n != 0 {
				t.Errorf("the model was called %d times for a refused request", n)
			}
		})
	}
}
