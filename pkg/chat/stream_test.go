package chat_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/bus"
)

// live returns what the worker published on a job's live stream.
func (p *publisher) live(jobID string) []bus.StreamMsg {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []bus.StreamMsg
	for _, m := range p.msgs {
		if s, ok := m.payload.(bus.StreamMsg); ok && m.subject == bus.SubjectStream(jobID) {
			out = append(out, s)
		}
	}
	return out
}

// A job whose client streams calls the model with stream: true and relays its text on
// the job's live subject, placed by offset and tagged with the attempt, with each
// search's start and end; a job whose client does not stream calls the model without
// it and relays no text.
func TestStreamingJobRelaysDeltas(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []func(http.ResponseWriter){
		calls(webSearch("c1", "weather in Paris")),
		text("Sunny [1]."),
		text("Hello."),
	})
	h.submit("j1", "Search the web: weather in Paris today?", `,"stream":true`)
	if err := h.job("j1", 1); err != nil {
		t.Fatal(err)
	}
	if err := h.resume(answerSearch(h.pub.searches()[0], "https://weather.example/paris"), 1); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.model.body(0), `"stream":true`) || !strings.Contains(h.model.body(1), `"include_usage":true`) {
		t.Errorf("the model was not asked to stream: %s", h.model.body(1))
	}
	var kinds []string
	var text strings.Builder
	for _, m := range h.pub.live("j1") {
		kinds = append(kinds, string(m.Type))
		if m.Type == bus.StreamDelta {
			if m.Hop != 1 || m.Offset != 0 || !strings.HasPrefix(m.Attempt, "w1.") {
				t.Errorf("delta %+v", m)
			}
			text.WriteString(m.Text)
		}
		if m.Type == bus.StreamSearchDone && (m.CallID != "c1" || len(m.Sources) != 1 || m.Sources[0].URL != "https://weather.example/paris" || m.Sources[0].Title == "") {
			t.Errorf("search done %+v", m)
		}
	}
	if strings.Join(kinds, ",") != "search_started,search_done,sources,delta" || text.String() != "Sunny [1]." {
		t.Fatalf("live stream %v, text %q", kinds, text.String())
	}

	h.submit("j2", "hi there")
	if err := h.job("j2", 1); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(h.model.body(2), `"stream"`) || len(h.pub.live("j2")) != 0 {
		t.Errorf("a job whose client does not stream: body %s, live %v", h.model.body(2), h.pub.live("j2"))
	}
}
