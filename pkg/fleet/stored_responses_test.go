package fleet_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/config"
)

func tenantClient(f *fleettest.Fleet, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(f.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// apiErr is the OpenAI error an SDK call ended with.
func apiErr(t *testing.T, err error) *openai.Error {
	t.Helper()
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("want an API error, got %v", err)
	}
	return e
}

// previous_response_id continues a stored response of the tenant: its input and its
// answer come before the new input, and the answer names it. A response made with
// store: false is not stored: GET answers 404 and previous_response_id 400
// previous_response_not_found, as OpenAI does, and so does another tenant's response. item_reference brings back a
// stored message.
func TestStoredResponses(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.File(func(c *config.File) {
		c.Tenants = []config.Tenant{{ID: "alice", APIKeyEnv: "STORED_KEY_A", APIKeys: []string{"key-alice"}}, {ID: "bob", APIKeyEnv: "STORED_KEY_B", APIKeys: []string{"key-bob"}}}
	}))
	alice, bob := tenantClient(f, "key-alice"), tenantClient(f, "key-bob")
	first, err := alice.Responses.New(ctx(t), responses.ResponseNewParams{
		Model: demo.Model, Instructions: openai.String("Be brief."),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("My name is Alice. sim:nosearch")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if first.PreviousResponseID != "" || first.Instructions.OfString != "Be brief." {
		t.Fatalf("first: %s", first.RawJSON())
	}
	second, err := alice.Responses.New(ctx(t), responses.ResponseNewParams{
		Model: demo.Model, PreviousResponseID: openai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What is my name? sim:nosearch")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if second.PreviousResponseID != first.ID || second.Status != responses.ResponseStatusCompleted {
		t.Fatalf("second: %s", second.RawJSON())
	}
	rec, err := f.Store.Jobs.GetResponse(ctx(t), second.ID)
	if err != nil {
		t.Fatal(err)
	}
	var items []map[string]any
	json.Unmarshal(rec.Input, &items)
	if len(items) != 3 || items[0]["content"] != "My name is Alice. sim:nosearch" || items[1]["type"] != "message" || items[1]["role"] != "assistant" ||
		items[2]["content"] != "What is my name? sim:nosearch" {
		t.Fatalf("second's conversation: %s", rec.Input)
	}
	if got, err := alice.Responses.Get(ctx(t), second.ID, responses.ResponseGetParams{}); err != nil || got.PreviousResponseID != first.ID {
		t.Fatalf("GET second: %v %+v", err, got)
	}

	// Another tenant cannot see or continue it.
	if _, err := bob.Responses.Get(ctx(t), first.ID, responses.ResponseGetParams{}); apiErr(t, err).StatusCode != http.StatusNotFound {
		t.Errorf("bob GET alice's response: %v", err)
	}
	_, err = bob.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.Model, PreviousResponseID: openai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi sim:nosearch")}})
	if e := apiErr(t, err); e.StatusCode != http.StatusBadRequest || e.Code != "previous_response_not_found" || e.Param != "previous_response_id" {
		t.Errorf("bob continuing alice's response: %v", err)
	}

	// store: false stores nothing to continue or fetch.
	unstored, err := alice.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.Model, Store: openai.Bool(false),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Forget me. sim:nosearch")}})
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	json.Unmarshal([]byte(unstored.RawJSON()), &raw)
	if string(raw["store"]) != "false" {
		t.Errorf("store echoed %s, want false", raw["store"])
	}
	if _, err := f.Store.Jobs.GetResponse(ctx(t), unstored.ID); err == nil {
		t.Error("a store: false response was stored")
	}
	if _, err := alice.Responses.Get(ctx(t), unstored.ID, responses.ResponseGetParams{}); apiErr(t, err).StatusCode != http.StatusNotFound {
		t.Errorf("GET a store: false response: %v", err)
	}
	_, err = alice.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.Model, PreviousResponseID: openai.String(unstored.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi sim:nosearch")}})
	if e := apiErr(t, err); e.StatusCode != http.StatusBadRequest || e.Code != "previous_response_not_found" {
		t.Errorf("continuing a store: false response: %v", err)
	}

	// item_reference: the first answer's message, by its id.
	msgID := ""
	for _, it := range first.Output {
		if it.Type == "message" {
			msgID = it.ID
		}
	}
	ref, err := alice.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.Model,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("My name is Alice. sim:nosearch", responses.EasyInputMessageRoleUser),
			{OfItemReference: &responses.ResponseInputItemItemReferenceParam{ID: msgID}},
			responses.ResponseInputItemParamOfMessage("And now? sim:nosearch", responses.EasyInputMessageRoleUser),
		}}})
	if err != nil {
		t.Fatal(err)
	}
	rec, err = f.Store.Jobs.GetResponse(ctx(t), ref.ID)
	if err != nil || !strings.Contains(string(rec.Input), `"id":"`+msgID+`"`) {
		t.Fatalf("item_reference not resolved: %v %s", err, rec.Input)
	}
	_, err = bob.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.Model,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			{OfItemReference: &responses.ResponseInputItemItemReferenceParam{ID: msgID}}}}})
	if e := apiErr(t, err); e.StatusCode != http.StatusNotFound || e.Code != "item_not_found" {
		t.Errorf("bob referencing alice's item: %v", err)
	}
}

// input_file: a text file (inline or uploaded, by file_id) reaches the model as text,
// and so does a PDF's text for a model that takes no files (Kimi); a file the model
// cannot read (there, a PDF without text to read) is a 400 that names the model.
func TestResponsesInputFile(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	c := openaiClient(f)
	note := base64.StdEncoding.EncodeToString([]byte("The launch code is 0451."))
	resp, err := c.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.Model,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage(responses.ResponseInputMessageContentListParam{
				{OfInputText: &responses.ResponseInputTextParam{Text: "Summarize the note. sim:nosearch"}},
				{OfInputFile: &responses.ResponseInputFileParam{Filename: openai.String("note.txt"), FileData: openai.String(note)}},
			}, responses.EasyInputMessageRoleUser)}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != responses.ResponseStatusCompleted {
		t.Fatalf("%s", resp.RawJSON())
	}
	rec, err := f.Store.Jobs.GetResponse(ctx(t), resp.ID)
	if err != nil || !strings.Contains(string(rec.Input), note) {
		t.Fatalf("the file is not in the stored conversation: %v", err)
	}

	// A PDF with text reaches a model without files as its text (sent as a data: URL,
	// as the compliance suite does).
	resp, err = c.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.ModelKimiNative,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage(responses.ResponseInputMessageContentListParam{
				{OfInputText: &responses.ResponseInputTextParam{Text: "Title? sim:nosearch"}},
				{OfInputFile: &responses.ResponseInputFileParam{Filename: openai.String("fixture.pdf"), FileData: openai.String("data:application/pdf;base64," + titlePDF())}},
			}, responses.EasyInputMessageRoleUser)}}})
	if err != nil || resp.Status != responses.ResponseStatusCompleted {
		t.Fatalf("a PDF with text: %v", err)
	}
	if !strings.Contains(resp.OutputText(), "Title: Fleet Conformance Fixture") { // the simulated model quotes what it read
		t.Fatalf("the model did not read the PDF's text: %s", resp.OutputText())
	}

	pdf := base64.StdEncoding.EncodeToString([]byte("%PDF-1.7\x00\x01binary"))
	_, err = c.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.ModelKimiNative,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage(responses.ResponseInputMessageContentListParam{
				{OfInputFile: &responses.ResponseInputFileParam{Filename: openai.String("report.pdf"), FileData: openai.String(pdf)}},
			}, responses.EasyInputMessageRoleUser)}}})
	if e := apiErr(t, err); e.StatusCode != http.StatusBadRequest || !strings.Contains(e.Message, demo.ModelKimiNative) || !strings.Contains(e.Message, "report.pdf") {
		t.Errorf("a PDF: %v", err)
	}
	_, err = c.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.Model,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage(responses.ResponseInputMessageContentListParam{
				{OfInputFile: &responses.ResponseInputFileParam{FileID: openai.String("file-nope")}},
			}, responses.EasyInputMessageRoleUser)}}})
	if e := apiErr(t, err); e.StatusCode != http.StatusNotFound || e.Code != "file_not_found" {
		t.Errorf("an unknown file_id: %v", err)
	}
}
