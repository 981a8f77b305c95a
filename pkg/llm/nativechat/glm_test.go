package nativechat_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/nativechat"
)

const glmBody = `{"model":"glm-4.7","messages":[{"role":"user","content":"2025年4月的重要财经事件"}],` +
	`"tools":[{"type":"function","function":{"name":"web_search","parameters":{"type":"object"}}}]}`

// GLM's web_search tool replaces the fleet's function; the response's top-level
// web_search array gives the sources, and the model's "[来源：ref_1]" markers become
// [n] (pages numbered by first citation, an uncited or link-less result no source);
// one search at search_pro's ¥0.03.
func TestGLMRecordedAnswer(t *testing.T) {
	t.Parallel()
	p := &replay{answers: [][]byte{fixtures.Read("zhipu/glm-chat-finance-zh.CONSTRUCTED.json")}}
	comp, err := newCaller(t, nativechat.GLM, p).Complete(context.Background(), []byte(glmBody), nil)
	if err != nil {
		t.Fatal(err)
	}
	var tools []map[string]any
	json.Unmarshal(p.requests[0]["tools"], &tools)
	if len(tools) != 1 || tools[0]["type"] != "web_search" || tools[0]["web_search"].(map[string]any)["search_result"] != true {
		t.Errorf("tools %s", p.requests[0]["tools"])
	}
	msg, n := native(t, comp.Message)
	content := text(msg["content"])
	if strings.Contains(content, "ref_") || strings.Count(content, "[1]") != 2 || strings.Contains(content, "[2]") {
		t.Errorf("content %q", content)
	}
	want := []llm.NativeSource{{URL: "https://www.sohu.com/a/887836650_121956424", Title: "4月23日财经焦点：全球市场重大事件与数据新动向解析"}}
	if n == nil || n.Protocol != "glm.chat" || n.Requests != 1 || n.CostUSD != 0.03*0.14 || !reflect.DeepEqual(n.Sources, want) {
		t.Fatalf("report %+v", n)
	}
	if len(n.Searches) != 1 || len(n.Searches[0].URLs) != 2 { // the third result has no link
		t.Errorf("searches %+v", n.Searches)
	}
	if comp.Usage.PromptTokens != 4199 || comp.FinishReason != "stop" {
		t.Errorf("usage %+v finish %s", comp.Usage, comp.FinishReason)
	}
}

// Streamed, the web_search array arrives as a top-level key of the last chunk (the
// documented default; no recording exists): the answer is the whole one's, and the
// text passed on before the first citing line is its prefix.
func TestGLMStreamed(t *testing.T) {
	t.Parallel()
	var rec struct {
		ID        string `json:"id"`
		Choices   []struct{ Message struct{ Content string } }
		Usage     json.RawMessage `json:"usage"`
		WebSearch json.RawMessage `json:"web_search"`
	}
	json.Unmarshal(fixtures.Read("zhipu/docs-en-chat-web-search-with-web_search-field.TRIMMED.response.json"), &rec)
	answer := "Here is the calendar.\n" + rec.Choices[0].Message.Content
	srv := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, piece := range strings.SplitAfter(answer, " ") {
			b, _ := json.Marshal(map[string]any{"id": rec.ID, "choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": piece}}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		b, _ := json.Marshal(map[string]any{"id": rec.ID, "choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}},
			"usage": rec.Usage, "web_search": rec.WebSearch})
		fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", b)
	})
	var streamed strings.Builder
	comp, err := newCaller(t, nativechat.GLM, srv).Complete(context.Background(), []byte(glmBody), func(d llm.Delta) { streamed.WriteString(d.Text) })
	if err != nil {
		t.Fatal(err)
	}
	msg, n := native(t, comp.Message)
	content := text(msg["content"])
	if !strings.Contains(content, "Released at 22:30. Crude oil inventory data will provide a key reference point for the market, affecting oil price fluctuations. [1]") || !strings.Contains(content, "[2]") {
		t.Errorf("content %q", content)
	}
	if streamed.String() != "Here is the calendar.\n" || !strings.HasPrefix(content, streamed.String()) {
		t.Errorf("streamed %q", streamed.String())
	}
	if n == nil || len(n.Sources) != 2 || n.Sources[0].Title != "April 23 Financial Highlights: Analyzing Major Global Market Events and New Data Trends" {
		t.Errorf("report %+v", n)
	}
	if comp.Usage.TotalTokens != 5067 {
		t.Errorf("usage %+v", comp.Usage)
	}
}

// A result's title suffix is read once, for main models and both GLM engines: its
// Beijing wall-clock time (the day alone, when that is all it gives), and a suffix
// without a date is still not part of the title.
func TestGLMTitle(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in, title string
		want      time.Time
	}{
		{"April 23 Highlights (Published: 2025-04-23 07:07:00)", "April 23 Highlights", time.Date(2025, 4, 22, 23, 7, 0, 0, time.UTC)},
		{"4月23日财经焦点（发布时间：2026-01-27）", "4月23日财经焦点", time.Date(2026, 1, 26, 16, 0, 0, 0, time.UTC)},
		{"Undated (Published: unknown)", "Undated", time.Time{}},
		{"No suffix (2025)", "No suffix (2025)", time.Time{}},
	} {
		title, at := nativechat.GLMTitle(c.in)
		if title != c.title || !at.Equal(c.want) {
			t.Errorf("GLMTitle(%q) = %q, %v; want %q, %v", c.in, title, at, c.title, c.want)
		}
	}
}
