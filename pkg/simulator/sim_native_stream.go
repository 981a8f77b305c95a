package simulator

import (
	"maps"

	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// The streamed forms of the generated native-search answers: each takes the answer's
// non-streamed body (sim_generated.go) and plays it as its provider streams it, in
// the event sequence of the provider's recorded stream (internal/fixtures:
// anthropic/pydantic-web-search-news-stream.sse, openai/pydantic-responses-raw-
// annotations-stream.sse, gemini/pydantic-stream-websearch-sf.sse), the text a token at
// a time.

// anthropicStream plays a Messages answer as Messages stream events.
func anthropicStream(body []byte) []wire.Event {
	m := decodeBody(body)
	var evs []wire.Event
	add := func(name string, v map[string]any) {
		v["type"] = name
		evs = append(evs, wire.Event{Name: name, Data: mustJSON(v)})
	}
	start := maps.Clone(m)
	usage := obj(m["usage"])
	startUsage := clone(usage)
	startUsage["output_tokens"] = 1
	delete(startUsage, "server_tool_use")
	start["content"], start["stop_reason"], start["stop_sequence"], start["usage"] = []any{}, nil, nil, startUsage
	add("message_start", map[string]any{"message": start})
	for i, b := range arr(m["content"]) {
		block := obj(b)
		switch block["type"] {
		case "server_tool_use":
			opening := clone(block)
			opening["input"] = map[string]any{}
			add("content_block_start", map[string]any{"index": i, "content_block": opening})
			add("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(mustJSON(block["input"]))}})
		case "text":
			opening := map[string]any{"type": "text", "text": ""}
			if block["citations"] != nil {
				opening["citations"] = []any{}
			}
			add("content_block_start", map[string]any{"index": i, "content_block": opening})
			for _, c := range arr(block["citations"]) {
				add("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "citations_delta", "citation": c}})
			}
			for _, tok := range tokens(jstr(block["text"])) {
				add("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": tok}})
			}
		default: // web_search_tool_result: whole in its start event
			add("content_block_start", map[string]any{"index": i, "content_block": block})
		}
		add("content_block_stop", map[string]any{"index": i})
	}
	add("message_delta", map[string]any{"delta": map[string]any{"stop_reason": m["stop_reason"], "stop_sequence": nil}, "usage": usage})
	add("message_stop", map[string]any{})
	return evs
}

// responsesStream plays a Responses answer as response.* stream events (a reasoning
// item's summary parts as reasoning_summary_part and reasoning_summary_text events).
func responsesStream(body []byte) []wire.Event {
	m := decodeBody(body)
	var evs []wire.Event
	seq := 0
	add := func(name string, v map[string]any) {
		v["type"], v["sequence_number"] = name, seq
		seq++
		evs = append(evs, wire.Event{Name: name, Data: mustJSON(v)})
	}
	opening := clone(m)
	opening["status"], opening["output"] = "in_progress", []any{}
	delete(opening, "usage")
	add("response.created", map[string]any{"response": opening})
	add("response.in_progress", map[string]any{"response": opening})
	for i, it := range arr(m["output"]) {
		item := obj(it)
		id := jstr(item["id"])
		switch item["type"] {
		case "web_search_call":
			add("response.output_item.added", map[string]any{"item": map[string]any{"id": id, "type": "web_search_call", "status": "in_progress"}, "output_index": i})
			for _, step := range []string{"in_progress", "searching", "completed"} {
				add("response.web_search_call."+step, map[string]any{"item_id": id, "output_index": i})
			}
		case "reasoning":
			add("response.output_item.added", map[string]any{"item": map[string]any{"id": id, "type": "reasoning", "summary": []any{}}, "output_index": i})
			for j, p := range arr(item["summary"]) {
				text := jstr(obj(p)["text"])
				at := func(v map[string]any) map[string]any {
					v["item_id"], v["output_index"], v["summary_index"] = id, i, j
					return v
				}
				add("response.reasoning_summary_part.added", at(map[string]any{"part": map[string]any{"type": "summary_text", "text": ""}}))
				add("response.reasoning_summary_text.delta", at(map[string]any{"delta": text}))
				add("response.reasoning_summary_text.done", at(map[string]any{"text": text}))
				add("response.reasoning_summary_part.done", at(map[string]any{"part": p}))
			}
		case "message":
			add("response.output_item.added", map[string]any{"item": map[string]any{"id": id, "type": "message", "status": "in_progress", "content": []any{}, "role": "assistant"}, "output_index": i})
			for j, p := range arr(item["content"]) {
				part := obj(p)
				add("response.content_part.added", map[string]any{"content_index": j, "item_id": id, "output_index": i,
					"part": map[string]any{"type": "output_text", "annotations": []any{}, "logprobs": []any{}, "text": ""}})
				for _, tok := range tokens(jstr(part["text"])) {
					add("response.output_text.delta", map[string]any{"content_index": j, "delta": tok, "item_id": id, "logprobs": []any{}, "output_index": i})
				}
				for k, an := range arr(part["annotations"]) {
					add("response.output_text.annotation.added", map[string]any{"annotation": an, "annotation_index": k, "content_index": j, "item_id": id, "output_index": i})
				}
				add("response.output_text.done", map[string]any{"content_index": j, "item_id": id, "logprobs": []any{}, "output_index": i, "text": part["text"]})
				add("response.content_part.done", map[string]any{"content_index": j, "item_id": id, "output_index": i, "part": part})
			}
		}
		add("response.output_item.done", map[string]any{"item": item, "output_index": i})
	}
	add("response.completed", map[string]any{"response": m})
	return evs
}

// geminiStream plays a generateContent answer as streamGenerateContent chunks: the
// text a token at a time with an empty groundingMetadata, the last chunk with the
// finish reason and the whole grounding metadata.
func geminiStream(body []byte) []wire.Event {
	m := decodeBody(body)
	c := obj(arr(m["candidates"])[0])
	text := jstr(jpath(c, "content", "parts", "0", "text"))
	toks := tokens(text)
	var evs []wire.Event
	for i, tok := range toks {
		chunk := map[string]any{"content": map[string]any{"parts": []any{map[string]any{"text": tok}}, "role": "model"}, "index": 0, "groundingMetadata": map[string]any{}}
		if i == len(toks)-1 {
			chunk["finishReason"], chunk["groundingMetadata"] = c["finishReason"], c["groundingMetadata"]
		}
		evs = append(evs, wire.Event{Data: mustJSON(map[string]any{"candidates": []any{chunk}, "usageMetadata": m["usageMetadata"], "modelVersion": m["modelVersion"], "responseId": m["responseId"]})})
	}
	return evs
}
