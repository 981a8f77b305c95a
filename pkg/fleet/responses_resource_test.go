package fleet_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/responses"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/config"

	llmresponses "github.com/searchfleet/searchfleet/pkg/llm/responses"
)

func twoTenants(t *testing.T) (*fleettest.Fleet, openai.Client, openai.Client) {
	t.Helper()
	f := fleettest.Start(t, fleettest.File(func(c *config.File) {
		quota := config.Limits{StorageBytes: 64 << 20}
		c.Tenants = []config.Tenant{{ID: "alice", APIKeyEnv: "RESOURCE_KEY_A", APIKeys: []string{"key-alice"}, Limits: quota}, {ID: "bob", APIKeyEnv: "RESOURCE_KEY_B", APIKeys: []string{"key-bob"}, Limits: quota}}
	}))
	return f, tenantClient(f, "key-alice"), tenantClient(f, "key-bob")
}

func input(items ...responses.ResponseInputItemUnionParam) responses.ResponseNewParamsInputUnion {
	return responses.ResponseNewParamsInputUnion{OfInputItemList: items}
}

func userItem(text string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleUser)
}

func fcOutput(callID, output string) responses.ResponseInputItemUnionParam {
	it := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	it.OfFunctionCallOutput.CallID = openai.String(callID)
	return it
}

// Every output item of a stored response is found by its id alone, as the Vercel AI
// SDK sends an earlier turn back: a web_search_call, the message, a function call,
// and a reasoning item (whose id is its model's, found among the responses the
// request's other items name). Another tenant's ids are not found.
func TestItemReferences(t *testing.T) {
	t.Parallel()
	f, alice, bob := twoTenants(t)
	// A Responses model: its reasoning items keep the model's ids.
	searched, err := alice.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.ModelResponses,
		Input:     responses.ResponseNewParamsInputUnion{OfString: openai.String("Search the web: latest Go release?")},
		Tools:     []responses.ToolUnionParam{{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}},
		Reasoning: responses.ReasoningParam{Effort: responses.ReasoningEffortLow, Summary: responses.ReasoningSummaryAuto}})
	if err != nil {
		t.Fatal(err)
	}
	byType := map[string]string{}
	for _, it := range searched.Output {
		byType[it.Type] = it.ID
	}
	if byType["web_search_call"] == "" || byType["message"] == "" || byType["reasoning"] == "" || llmresponses.ItemResponse(byType["reasoning"]) != "" {
		t.Fatalf("output %s", searched.RawJSON())
	}
	var refs []responses.ResponseInputItemUnionParam
	refs = append(refs, userItem("Search the web: latest Go release?"))
	for _, it := range searched.Output {
		refs = append(refs, responses.ResponseInputItemParamOfItemReference(it.ID))
	}
	refs = append(refs, userItem("And the one before? sim:nosearch"))
	next, err := alice.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.ModelResponses, Input: input(refs...)})
	if err != nil || next.Status != responses.ResponseStatusCompleted {
		t.Fatalf("the turn by reference: %v", err)
	}
	rec, err := f.Store.Jobs.GetResponse(ctx(t), next.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range byType {
		if !strings.Contains(string(rec.Input), `"id":"`+id+`"`) {
			t.Errorf("%s not resolved into the input: %s", id, rec.Input)
		}
	}
	// A reasoning item alone names no response: not found.
	_, err = alice.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.Model,
		Input: input(userItem("hi sim:nosearch"), responses.ResponseInputItemParamOfItemReference(byType["reasoning"]))})
	if e := apiErr(t, err); e.StatusCode != http.StatusNotFound || e.Code != "item_not_found" {
		t.Errorf("a lone reasoning reference: %v", err)
	}
	for _, id := range []string{byType["web_search_call"], byType["message"]} {
		_, err = bob.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.Model,
			Input: input(userItem("hi sim:nosearch"), responses.ResponseInputItemParamOfItemReference(id))})
		if e := apiErr(t, err); e.StatusCode != http.StatusNotFound || e.Code != "item_not_found" {
			t.Errorf("bob referencing alice's %s: %v", id, err)
		}
	}

	// A function call, by reference, answered by its output. Its answer has no empty
	// message before the call.
	weather := responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Parameters: map[string]any{"type": "object"}}}
	called, err := alice.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.Model, Tools: []responses.ToolUnionParam{weather},
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Paris sim:tool=get_weather sim:nosearch")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(called.Output) != 1 || called.Output[0].Type != "function_call" {
		t.Fatalf("a function call answer: %s", called.RawJSON())
	}
	call := called.Output[0]
	answered, err := alice.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.Model, Tools: []responses.ToolUnionParam{weather},
		Input: input(userItem("Weather in Paris sim:tool=get_weather sim:nosearch"), responses.ResponseInputItemParamOfItemReference(call.ID),
			fcOutput(call.CallID, `{"temp_c":18}`))})
	if err != nil || answered.Status != responses.ResponseStatusCompleted {
		t.Fatalf("the call's output by reference: %v", err)
	}
}

// A background response is cancelled while it runs; a finished one, a foreground one
// and another tenant's cannot be. A deleted response is not found by any route, and
// its input items page as the SDK reads them.
func TestCancelDeleteInputItems(t *testing.T) {
	t.Parallel()
	_, alice, bob := twoTenants(t)
	bg, err := alice.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.Model, Background: openai.Bool(true),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Tell me a story. sim:nosearch sim:model-slow=10s")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Responses.Cancel(ctx(t), bg.ID); apiErr(t, err).StatusCode != http.StatusNotFound {
		t.Errorf("bob cancelling alice's response: %v", err)
	}
	got, err := alice.Responses.Cancel(ctx(t), bg.ID)
	if err != nil || got.Status != responses.ResponseStatusCancelled {
		t.Fatalf("cancel: %v %+v", err, got)
	}
	done, err := alice.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.Model, Background: openai.Bool(true),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Hello. sim:nosearch")}})
	if err != nil {
		t.Fatal(err)
	}
	for done.Status != responses.ResponseStatusCompleted {
		if done, err = alice.Responses.Get(ctx(t), done.ID, responses.ResponseGetParams{}); err != nil || done.Status == responses.ResponseStatusFailed {
			t.Fatalf("waiting for a background response: %v", err)
		}
	}
	if _, err := alice.Responses.Cancel(ctx(t), done.ID); apiErr(t, err).StatusCode != http.StatusBadRequest || apiErr(t, err).Message != "Cannot cancel a completed response." {
		t.Errorf("cancelling a completed response: %v", err)
	}

	r, err := alice.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.Model, Input: input(userItem("One. sim:nosearch"), userItem("Two."), userItem("Three."))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Responses.Cancel(ctx(t), r.ID); apiErr(t, err).StatusCode != http.StatusBadRequest {
		t.Errorf("cancelling a foreground response: %v", err)
	}
	var texts []string
	pager := alice.Responses.InputItems.ListAutoPaging(ctx(t), r.ID, responses.InputItemListParams{Limit: openai.Int(2), Order: responses.InputItemListParamsOrderAsc})
	for pager.Next() {
		it := pager.Current()
		if it.ID == "" || it.Type != "message" {
			t.Errorf("input item %s", it.RawJSON())
		}
		texts = append(texts, it.AsMessage().Content[0].Text)
	}
	if err := pager.Err(); err != nil || strings.Join(texts, " ") != "One. sim:nosearch Two. Three." {
		t.Fatalf("input items %q %v", texts, err)
	}
	if _, err := bob.Responses.InputItems.List(ctx(t), r.ID, responses.InputItemListParams{}); apiErr(t, err).StatusCode != http.StatusNotFound {
		t.Errorf("bob listing alice's input: %v", err)
	}
	if err := bob.Responses.Delete(ctx(t), r.ID); apiErr(t, err).StatusCode != http.StatusNotFound {
		t.Errorf("bob deleting alice's response: %v", err)
	}
	if err := alice.Responses.Delete(ctx(t), r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Responses.Get(ctx(t), r.ID, responses.ResponseGetParams{}); apiErr(t, err).StatusCode != http.StatusNotFound {
		t.Errorf("retrieving a deleted response: %v", err)
	}
	_, err = alice.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.Model, PreviousResponseID: openai.String(r.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Go on. sim:nosearch")}})
	if e := apiErr(t, err); e.StatusCode != http.StatusBadRequest || e.Code != "previous_response_not_found" || e.Param != "previous_response_id" {
		t.Errorf("continuing a deleted response: %v", err)
	}
}

// A conversation is its tenant's: two responses that name it run on its items and
// add their turns, so the second sees the first; its items are charged to the
// storage quota and given back when it is deleted.
func TestConversationsAPI(t *testing.T) {
	t.Parallel()
	f, alice, bob := twoTenants(t)
	before, err := f.Store.Ledger.StorageOf(ctx(t), "alice")
	if err != nil {
		t.Fatal(err)
	}
	conv, err := alice.Conversations.New(ctx(t), conversations.ConversationNewParams{Items: []responses.ResponseInputItemUnionParam{userItem("My name is Ada. sim:nosearch")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Conversations.Get(ctx(t), conv.ID); apiErr(t, err).StatusCode != http.StatusNotFound {
		t.Errorf("bob reading alice's conversation: %v", err)
	}
	_, err = bob.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.Model, Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)},
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi sim:nosearch")}})
	if e := apiErr(t, err); e.StatusCode != http.StatusNotFound || e.Param != "conversation" {
		t.Errorf("bob continuing alice's conversation: %v", err)
	}
	var ids []string
	for _, q := range []string{"Remember it. sim:nosearch", "What is my name? sim:nosearch"} {
		r, err := alice.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.Model, Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)},
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(q)}})
		if err != nil || r.Status != responses.ResponseStatusCompleted {
			t.Fatalf("a turn: %v", err)
		}
		var raw map[string]json.RawMessage
		json.Unmarshal([]byte(r.RawJSON()), &raw)
		if string(raw["conversation"]) != `{"id":"`+conv.ID+`"}` {
			t.Errorf("the response names %s", raw["conversation"])
		}
		ids = append(ids, r.ID)
	}
	rec, err := f.Store.Jobs.GetResponse(ctx(t), ids[1])
	if err != nil {
		t.Fatal(err)
	}
	var in []map[string]any
	json.Unmarshal(rec.Input, &in)
	if len(in) != 4 || rec.Prior != 3 || !strings.Contains(string(rec.Input), "My name is Ada.") || in[2]["role"] != "assistant" {
		t.Fatalf("the second turn ran on %s (prior %d)", rec.Input, rec.Prior)
	}
	page, err := alice.Conversations.Items.List(ctx(t), conv.ID, conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc})
	if err != nil || len(page.Data) != 5 {
		t.Fatalf("items: %v %d", err, len(page.Data))
	}
	roles := []string{}
	for _, it := range page.Data {
		roles = append(roles, it.Role)
	}
	if strings.Join(roles, " ") != "user user assistant user assistant" {
		t.Errorf("roles %v", roles)
	}
	// A streamed turn is added before its stream ends; a background one by the
	// finisher, once it completes.
	stream := alice.Responses.NewStreaming(ctx(t), responses.ResponseNewParams{Model: demo.Model, Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)},
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Streamed. sim:nosearch")}})
	for stream.Next() {
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if page, err := alice.Conversations.Items.List(ctx(t), conv.ID, conversations.ItemListParams{}); err != nil || len(page.Data) != 7 || page.Data[0].Role != "assistant" {
		t.Fatalf("after a streamed turn: %v %d", err, len(page.Data))
	}
	bg, err := alice.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.Model, Background: openai.Bool(true), Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)},
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("In the background. sim:nosearch")}})
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; ; n++ {
		page, err := alice.Conversations.Items.List(ctx(t), conv.ID, conversations.ItemListParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Data) == 9 && page.Data[0].ID == "msg_"+bg.ID {
			break
		}
		if n == 200 {
			t.Fatalf("the background turn was not added: %d items", len(page.Data))
		}
		time.Sleep(25 * time.Millisecond)
	}

	during, _ := f.Store.Ledger.StorageOf(ctx(t), "alice")
	if during.Records <= before.Records {
		t.Errorf("the conversation is not charged: %+v then %+v", before, during)
	}
	if _, err := alice.Conversations.Delete(ctx(t), conv.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Conversations.Items.List(ctx(t), conv.ID, conversations.ItemListParams{}); apiErr(t, err).StatusCode != http.StatusNotFound {
		t.Errorf("a deleted conversation's items: %v", err)
	}
	after, _ := f.Store.Ledger.StorageOf(ctx(t), "alice")
	if after.Records != during.Records-1 {
		t.Errorf("the deleted conversation's bytes: %+v then %+v", during, after)
	}
}
