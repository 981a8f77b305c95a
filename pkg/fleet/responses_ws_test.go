package fleet_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/openresponses"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/config"
)

// socketTurn is what one response.create brought back on a socket: its events and
// the terminal response, or the error event.
type socketTurn struct {
	events   []openresponses.Event
	types    []string
	response map[string]any
	err      map[string]any
}

// create sends one response.create (body without its type) and reads the turn's
// events to its terminal event or error, with the official SDK's connection.
// inputTokens is a turn's usage.input_tokens.
func inputTokens(turn socketTurn) int {
	u, _ := turn.response["usage"].(map[string]any)
	n, _ := u["input_tokens"].(float64)
	return int(n)
}

func create(t *testing.T, conn *responses.ResponseConnection, body string) socketTurn {
	t.Helper()
	if err := conn.SendRaw(ctx(t), json.RawMessage(`{"type":"response.create",`+body+`}`)); err != nil {
		t.Fatal(err)
	}
	var turn socketTurn
	for {
		ev, err := conn.Recv(ctx(t))
		if err != nil {
			t.Fatalf("reading the turn of %s: %v", body, err)
		}
		raw := []byte(ev.RawJSON())
		var o map[string]any
		if err := json.Unmarshal(raw, &o); err != nil {
			t.Fatal(err)
		}
		typ, _ := o["type"].(string)
		turn.types = append(turn.types, typ)
		switch typ {
		case "error":
			if errs := openresponses.CheckSocketError("error event", o); len(errs) > 0 {
				t.Fatalf("%v\n%s", errs, raw)
			}
			if ev.AsResponsesServerEventResponseWsError().Error.Code == "" {
				t.Fatalf("the SDK read no code in %s", raw)
			}
			turn.err = o
			return turn
		}
		turn.events = append(turn.events, openresponses.Event{Name: typ, Data: raw})
		if typ == "response.completed" || typ == "response.failed" || typ == "response.incomplete" {
			turn.response = o["response"].(map[string]any)
			if errs := openresponses.CheckEvents(turn.events); len(errs) > 0 {
				t.Fatalf("the turn's events break the specification: %v", errs)
			}
			return turn
		}
	}
}

func errCode(turn socketTurn) string {
	if turn.err == nil {
		return ""
	}
	return turn.err["error"].(map[string]any)["code"].(string)
}

// sseTypes are the event types of a streamed POST /v1/responses.
func sseTypes(t *testing.T, f *fleettest.Fleet, key, body string) []string {
	t.Helper()
	req, _ := http.NewRequest("POST", f.URL+"/v1/responses", strings.NewReader(`{"stream":true,`+body+`}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var types []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var o struct{ Type string }
			json.Unmarshal([]byte(data), &o)
			types = append(types, o.Type)
		}
	}
	return types
}

// Responses WebSocket mode, through the official Go SDK: a turn sends the events a
// streamed POST sends; turns follow one another on one socket; a store:false response
// is continued on its socket (its conversation reaches the model) and nowhere else; a
// continuation that fails forgets the response it continued; a stored one goes on
// over HTTP; refusals are error events in the Responses shape and the socket stays
// open.
func TestResponsesWebSocket(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.File(func(c *config.File) {
		c.Tenants = []config.Tenant{{ID: "alice", APIKeyEnv: "WS_KEY_A", APIKeys: []string{"key-alice"}}}
	}))
	alice := tenantClient(f, "key-alice")
	conn, err := alice.Responses.Connect(ctx(t), responses.ResponseConnectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	hello := fmt.Sprintf(`"model":%q,"input":"Count from 1 to 3. sim:nosearch"`, demo.Model)
	first := create(t, conn, hello)
	if first.response["status"] != "completed" {
		t.Fatalf("first turn: %v %v", first.types, first.err)
	}
	if want := sseTypes(t, f, "key-alice", hello); !slices.Equal(first.types, want) {
		t.Fatalf("socket events %v\nstream events %v", first.types, want)
	}

	remember := create(t, conn, fmt.Sprintf(`"model":%q,"store":false,"input":"Remember the code word: cobalt. Reply with OK. sim:nosearch"`, demo.Model))
	rememberID, _ := remember.response["id"].(string)
	if remember.response["status"] != "completed" || rememberID == "" {
		t.Fatalf("store:false turn: %v %v", remember.types, remember.err)
	}
	asked := create(t, conn, fmt.Sprintf(`"model":%q,"store":false,"previous_response_id":%q,"input":"What is the code word? sim:nosearch"`, demo.Model, rememberID))
	if asked.response["status"] != "completed" || asked.response["previous_response_id"] != rememberID {
		t.Fatalf("continuation: %v %v", asked.types, asked.err)
	}
	// Its conversation reached the model: the model's prompt is longer than the same
	// question's alone by at least the turn it remembers (the simulator counts a
	// request's bytes / 4 as its input tokens). A store: false job keeps no request
	// to look at once answered.
	alone := create(t, conn, fmt.Sprintf(`"model":%q,"store":false,"input":"What is the code word? sim:nosearch"`, demo.Model))
	if grew, least := inputTokens(asked)-inputTokens(alone), len("Remember the code word: cobalt. Reply with OK.")/4; grew < least {
		t.Fatalf("the continuation's prompt is %d tokens longer than the question's alone, want at least %d: it ran without its conversation", grew, least)
	}
	if status, _, _ := f.Do(t, "GET", "/v1/responses/"+rememberID, nil); status != http.StatusNotFound && status != http.StatusUnauthorized {
		t.Fatalf("GET of a store:false response: %d", status)
	}

	// Another socket of the same tenant does not have it.
	other, err := alice.Responses.Connect(ctx(t), responses.ResponseConnectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	miss := create(t, other, fmt.Sprintf(`"model":%q,"store":false,"previous_response_id":%q,"input":"Continue. sim:nosearch"`, demo.Model, rememberID))
	if errCode(miss) != "previous_response_not_found" || miss.err["error"].(map[string]any)["param"] != "previous_response_id" {
		t.Fatalf("another socket: %v", miss.err)
	}
	if recovered := create(t, other, hello); recovered.response["status"] != "completed" {
		t.Fatalf("the socket after an error: %v %v", recovered.types, recovered.err)
	}
	// The SDK's FinalResponse surfaces an error event as a ResponseProtocolError.
	if err := other.SendRaw(ctx(t), json.RawMessage(fmt.Sprintf(`{"type":"response.create","model":%q,"previous_response_id":"resp_neverexisted","input":"x"}`, demo.Model))); err != nil {
		t.Fatal(err)
	}
	var pe *responses.ResponseProtocolError
	if _, err := other.FinalResponse(ctx(t)); !errors.As(err, &pe) || pe.Event.AsResponsesServerEventResponseWsError().Status != http.StatusBadRequest {
		t.Fatalf("FinalResponse of a missing previous response: %v", err)
	}

	// A continuation that fails forgets the response it continued.
	orphan := create(t, conn, fmt.Sprintf(`"model":%q,"store":false,"previous_response_id":%q,"input":[{"type":"function_call_output","call_id":"call_missing","output":"x"}]`, demo.Model, asked.response["id"]))
	if orphan.err == nil || orphan.err["status"].(float64) != http.StatusBadRequest {
		t.Fatalf("an output without its call: %v %v", orphan.types, orphan.response)
	}
	stale := create(t, conn, fmt.Sprintf(`"model":%q,"store":false,"previous_response_id":%q,"input":"Again. sim:nosearch"`, demo.Model, asked.response["id"]))
	if errCode(stale) != "previous_response_not_found" {
		t.Fatalf("after a failed continuation: %v", stale.err)
	}

	// A stored response made on a socket goes on over HTTP.
	kept := create(t, conn, fmt.Sprintf(`"model":%q,"input":"My name is Alice. sim:nosearch"`, demo.Model))
	next, err := alice.Responses.New(ctx(t), responses.ResponseNewParams{Model: demo.Model, PreviousResponseID: openai.String(kept.response["id"].(string)),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What is my name? sim:nosearch")}})
	if err != nil || next.Status != responses.ResponseStatusCompleted {
		t.Fatalf("continuing a socket's stored response over HTTP: %v", err)
	}

	// Refusals on an open socket.
	for _, c := range []struct{ msg, code string }{
		{`not json`, "invalid_json"},
		{`{"type":"session.update"}`, "unknown_event"},
		{fmt.Sprintf(`{"type":"response.create","model":%q,"input":"x","stream":true}`, demo.Model), "invalid_request_error"},
		{`{"type":"response.create","model":"no-such-model","input":"x"}`, "model_not_found"},
	} {
		if err := conn.SendRaw(ctx(t), json.RawMessage(c.msg)); err != nil {
			t.Fatal(err)
		}
		raw, err := conn.RecvRaw(ctx(t))
		if err != nil {
			t.Fatalf("%s: %v", c.msg, err)
		}
		var o map[string]any
		json.Unmarshal(raw, &o)
		if errs := openresponses.CheckSocketError(c.msg, o); len(errs) > 0 || o["error"].(map[string]any)["code"] != c.code {
			t.Fatalf("%s: %s %v", c.msg, raw, errs)
		}
		if bytes.Contains(raw, []byte("redis")) || bytes.Contains(raw, []byte("nats")) {
			t.Fatalf("%s: an internal detail in %s", c.msg, raw)
		}
	}
	if last := create(t, conn, hello); last.response["status"] != "completed" {
		t.Fatalf("the socket after refusals: %v", last.err)
	}
}

// POST /v1/responses/compact, through the official Go SDK, for every model: the
// client's turns and one compaction item, in the specification's shape; the window
// starts a new response (over HTTP and on a socket) without previous_response_id.
func TestResponsesCompact(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	c := openaiClient(f)
	for _, model := range listedModels(t, f) {
		status, b, _ := f.Do(t, "POST", "/v1/responses/compact", fmt.Sprintf(`{"model":%q,"prompt_cache_key":"k","input":[
			{"type":"message","role":"user","content":[{"type":"input_text","text":"Remember the compaction code word: slate."}]},
			{"type":"message","role":"assistant","content":[{"type":"output_text","text":"OK."}]},
			{"type":"message","role":"user","content":"Compress this conversation."}]}`, model))
		var o map[string]any
		if err := json.Unmarshal(b, &o); err != nil || status != http.StatusOK {
			t.Fatalf("%s: %d %s", model, status, b)
		}
		if errs := openresponses.CheckCompaction(model, o); len(errs) > 0 {
			t.Fatalf("%v\n%s", errs, b)
		}
		out := o["output"].([]any)
		if len(out) != 3 || out[2].(map[string]any)["type"] != "compaction" {
			t.Fatalf("%s: output %s", model, b)
		}
		window, _ := json.Marshal(append(out, map[string]any{"type": "message", "role": "user", "content": "Continue from here. sim:nosearch"}))
		status, b, _ = f.Do(t, "POST", "/v1/responses", fmt.Sprintf(`{"model":%q,"input":%s}`, model, window))
		if status != http.StatusOK || !strings.Contains(string(b), `"status":"completed"`) {
			t.Fatalf("%s: the compacted window as input: %d %s", model, status, b)
		}
	}

	// The SDK reads the compaction and sends it back unchanged.
	compacted, err := c.Responses.Compact(ctx(t), responses.ResponseCompactParams{Model: responses.ResponseCompactParamsModel(demo.Model),
		Input: responses.ResponseCompactParamsInputUnion{OfString: openai.String("Remember: slate.")}})
	if err != nil {
		t.Fatal(err)
	}
	if compacted.Object != "response.compaction" || len(compacted.Output) != 2 || compacted.Output[1].Type != "compaction" || compacted.Output[1].EncryptedContent == "" {
		t.Fatalf("SDK compaction %s", compacted.RawJSON())
	}
	conn, err := c.Responses.Connect(ctx(t), responses.ResponseConnectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var items []json.RawMessage
	for _, it := range compacted.Output {
		items = append(items, json.RawMessage(it.RawJSON()))
	}
	window, _ := json.Marshal(append(items, json.RawMessage(`{"type":"message","role":"user","content":"Continue. sim:nosearch"}`)))
	if turn := create(t, conn, fmt.Sprintf(`"model":%q,"store":false,"input":%s`, demo.Model, window)); turn.response["status"] != "completed" {
		t.Fatalf("the window on a socket: %v", turn.err)
	}

	// Refusals, in the Responses error shape.
	for _, c := range []struct {
		body   string
		status int
		param  string
	}{
		{`{"input":"x"}`, 400, "model"},
		{`{"model":"no-such-model","input":"x"}`, 404, "model"},
		{fmt.Sprintf(`{"model":%q,"input":"x","tools":[]}`, demo.Model), 400, "tools"},
		{fmt.Sprintf(`{"model":%q,"input":[{"role":"user","content":"w?"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}]}`, demo.Model), 400, "input"},
		{fmt.Sprintf(`{"model":%q,"input":[{"type":"compaction","encrypted_content":"forged"}]}`, demo.Model), 400, "input[0].encrypted_content"},
	} {
		status, b, _ := f.Do(t, "POST", "/v1/responses/compact", c.body)
		e := apiError(t, b)
		if status != c.status || e["param"] != c.param || e["message"] == "" {
			t.Fatalf("%s: %d %s", c.body, status, b)
		}
	}
}
