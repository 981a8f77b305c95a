package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/searchfleet/searchfleet/internal/demo"
)

// statelessTurn is one turn of a stateless Responses conversation: the input so far,
// with what it adds.
func statelessTurn(model string, input []responses.ResponseInputItemUnionParam, include bool) responses.ResponseNewParams {
	weather := responses.FunctionToolParam{Name: "get_weather", Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}
	p := responses.ResponseNewParams{Model: model, Store: openai.Bool(false), Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input},
		Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortLow},
		Tools:     []responses.ToolUnionParam{{OfFunction: &weather}}}
	if include {
		p.Include = []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent}
	}
	return p
}

// asInput is a response's output items as the next turn's input, as a stateless
// client sends them back.
func asInput(t *testing.T, out []responses.ResponseOutputItemUnion) []responses.ResponseInputItemUnionParam {
	var in []responses.ResponseInputItemUnionParam
	for _, it := range out {
		switch it.Type {
		case "reasoning":
			p := it.AsReasoning().ToParam()
			in = append(in, responses.ResponseInputItemUnionParam{OfReasoning: &p})
		case "function_call":
			p := it.AsFunctionCall().ToParam()
			in = append(in, responses.ResponseInputItemUnionParam{OfFunctionCall: &p})
		case "message":
			p := it.AsMessage().ToParam()
			in = append(in, responses.ResponseInputItemUnionParam{OfOutputMessage: &p})
		default:
			t.Fatalf("unexpected output item %s", it.Type)
		}
	}
	return in
}

// completedStream streams a response and returns the response.completed event's
// response, its output items checked against the output_item.done events.
func completedStream(c openai.Client, p responses.ResponseNewParams) (*responses.Response, error) {
	st := c.Responses.NewStreaming(context.Background(), p)
	var done []string
	var final *responses.Response
	for st.Next() {
		switch ev := st.Current(); ev.Type {
		case "response.output_item.done":
			done = append(done, ev.Item.RawJSON())
		case "response.completed":
			final = &ev.Response
		}
	}
	if err := st.Err(); err != nil {
		return nil, err
	}
	if final == nil {
		return nil, errors.New("no response.completed")
	}
	for _, it := range final.Output {
		if !slices.Contains(done, it.RawJSON()) {
			return nil, fmt.Errorf("output item %s was not streamed as it completed", it.RawJSON())
		}
	}
	return final, nil
}

// A stateless (store false) conversation through openai-go, asking for
// include ["reasoning.encrypted_content"], on each reasoning family: Claude's signed
// thinking, a Responses model's reasoning items, Gemini's thought signatures, a Chat
// thinking model's reasoning_content. Two questions, each answered after a round
// trip through the client's function tool (the answers streamed): each answer's
// reasoning items carry the model's state sealed by the fleet, the client sends them
// back with the rest of the output, and the strict simulator verifies the model's
// own state on the turns that continue a call (and finds nothing amiss on any). The
// same conversation without include gives the client no state to send back, and the
// model refuses the tool result's turn; a sealed item altered by the client is
// refused as OpenAI refuses encrypted content it cannot verify.
func TestStatelessReasoningCarriesEncryptedContent(t *testing.T) {
	t.Parallel()
	f, _ := reasoningFleet(t)
	c := openaiClient(f)
	user := func(text string) responses.ResponseInputItemUnionParam {
		return responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleUser)
	}
	stats := func() (verified, refused int64) {
		st := f.Sim.Stats().Requests
		return st["model_reasoning_verified"], st["model_reasoning_refused"]
	}
	for _, model := range []string{demo.ModelClaude, demo.ModelResponses, demo.ModelGemini, demo.Model} {
		input := []responses.ResponseInputItemUnionParam{user("Weather in Paris sim:tool=get_weather sim:nosearch")}
		var first []responses.ResponseInputItemUnionParam // the first turn's input and output
		var firstOut []responses.ResponseOutputItemUnion
		for turn := 1; turn <= 4; turn++ {
			v0, r0 := stats()
			var resp *responses.Response
			var err error
			if turn%2 == 1 {
				resp, err = c.Responses.New(ctx(t), statelessTurn(model, input, true))
			} else {
				resp, err = completedStream(c, statelessTurn(model, input, true)) // the sealed items streamed
			}
			if err != nil {
				t.Fatalf("%s turn %d: %v", model, turn, err)
			}
			v1, r1 := stats()
			var call responses.ResponseFunctionToolCall
			sealed := 0
			for _, it := range resp.Output {
				if it.Type == "function_call" {
					call = it.AsFunctionCall()
				}
				if rs := it.AsReasoning(); it.Type == "reasoning" && strings.HasPrefix(rs.EncryptedContent, "sfr1.") {
					sealed++
				}
			}
			// Gemini's state is the thought signature of a call: an answer without one
			// has none, and says so.
			empty := strings.Contains(resp.RawJSON(), "reasoning.encrypted_content is empty")
			if stateless := model == demo.ModelGemini && turn%2 == 0; sealed == 0 != stateless || empty != stateless {
				t.Errorf("%s turn %d: %d sealed reasoning items: %s", model, turn, sealed, resp.RawJSON())
			}
			if r1 != r0 {
				t.Errorf("%s turn %d: the simulator refused the model's state", model, turn)
			}
			// The turns that answer a call carry its reasoning; Gemini checks only the
			// current turn's calls, which a new question has none of.
			if checked := turn%2 == 0 || turn == 3 && model != demo.ModelGemini; checked && v1 == v0 {
				t.Errorf("%s turn %d: the simulator verified no reasoning state", model, turn)
			}
			if turn == 1 {
				first, firstOut = append(append([]responses.ResponseInputItemUnionParam(nil), input...), asInput(t, resp.Output)...), resp.Output
			}
			input = append(input, asInput(t, resp.Output)...)
			switch turn {
			case 1, 3:
				if call.CallID == "" {
					t.Fatalf("%s turn %d: no function call: %s", model, turn, resp.RawJSON())
				}
				input = append(input, callOutput(call.CallID, `{"temp_c": 18}`))
			case 2:
				if resp.OutputText() == "" || call.CallID != "" {
					t.Fatalf("%s turn 2: not an answer: %s", model, resp.RawJSON())
				}
				input = append(input, user("And in Rome? sim:tool=get_weather sim:nosearch"))
			}
		}

		// The first call's result without include: nothing to send back.
		bare := []responses.ResponseInputItemUnionParam{user("Weather in Paris sim:tool=get_weather sim:nosearch")}
		resp, err := c.Responses.New(ctx(t), statelessTurn(model, bare, false))
		if err != nil {
			t.Fatalf("%s without include: %v", model, err)
		}
		for _, it := range resp.Output {
			if it.Type == "reasoning" && it.AsReasoning().EncryptedContent != "" {
				t.Errorf("%s: encrypted content not asked for, but given: %s", model, resp.RawJSON())
			}
		}
		bare = append(bare, asInput(t, resp.Output)...)
		bare = append(bare, callOutput(resp.Output[len(resp.Output)-1].AsFunctionCall().CallID, `{"temp_c": 18}`))
		if _, err := c.Responses.New(ctx(t), statelessTurn(model, bare, false)); err == nil {
			t.Errorf("%s: the tool result's turn without the model's state was accepted: the simulator does not check it", model)
		}

		// An altered seal.
		for i, it := range first {
			if it.OfReasoning == nil {
				continue
			}
			rs := firstOut[i-1].AsReasoning()
			// One character in the middle changed: every bit of it counts (the last
			// character of unpadded base64 may carry bits a decoder ignores).
			enc := []byte(rs.EncryptedContent)
			if mid := len(enc) / 2; enc[mid] == 'A' {
				enc[mid] = 'B'
			} else {
				enc[mid] = 'A'
			}
			altered := responses.ResponseReasoningItemParam{ID: rs.ID, Summary: []responses.ResponseReasoningItemSummaryParam{},
				EncryptedContent: openai.String(string(enc))}
			in := append([]responses.ResponseInputItemUnionParam(nil), first...)
			in[i] = responses.ResponseInputItemUnionParam{OfReasoning: &altered}
			in = append(in, callOutput(firstOut[len(firstOut)-1].AsFunctionCall().CallID, `{}`))
			_, err := c.Responses.New(ctx(t), statelessTurn(model, in, true))
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Code != "invalid_encrypted_content" {
				t.Errorf("%s: an altered seal: %v", model, err)
			}
			break
		}
	}
}

// A Responses client that asks for the encrypted content of a model that does not
// reason is told it is empty.
func TestEncryptedContentOfAModelWithoutReasoningIsNamed(t *testing.T) {
	t.Parallel()
	f, _ := reasoningFleet(t)
	status, body, _ := f.Do(t, "POST", "/v1/responses", map[string]any{"model": demo.ModelResponses, "store": false,
		"include": []string{"reasoning.encrypted_content"}, "input": "hi sim:nosearch"})
	if status != http.StatusOK || !strings.Contains(string(body), "reasoning.encrypted_content is empty: the model gave no reasoning state") {
		t.Fatalf("status %d: %s", status, body)
	}
}

// callOutput is a function_call_output item.
func callOutput(callID, output string) responses.ResponseInputItemUnionParam {
	it := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	it.OfFunctionCallOutput.CallID = openai.String(callID)
	return it
}
