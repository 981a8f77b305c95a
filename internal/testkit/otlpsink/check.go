package otlpsink

import (
	"testing"
	"time"
)

// Await waits until the sink has a span named last in trace id and returns the trace.
func (sink *Sink) Await(t testing.TB, id, last string) []Span {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		spans := sink.Trace(id)
		for _, s := range spans {
			if s.Name == last {
				time.Sleep(300 * time.Millisecond) // the spans ended with it, exported in the same batch or the next
				return sink.Trace(id)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no span %q in trace %s after 30s; got %v (all: %d spans)", last, id, names(spans), len(sink.Spans()))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func names(spans []Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name+"@"+s.Service)
	}
	return out
}

// CheckSearchJob checks the trace of a one-search synchronous chat completion of
// the demo model (sim-scripted) on brave: the spans each role makes, each parented
// within the trace (the request span under the client's span clientSpan), and, when
// services names them, which process sent which span.
func CheckSearchJob(t testing.TB, spans []Span, clientSpan string, services map[string]string) {
	t.Helper()
	byID := map[string]Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	find := func(name string) []Span {
		var out []Span
		for _, s := range spans {
			if s.Name == name {
				out = append(out, s)
			}
		}
		if len(out) == 0 {
			t.Fatalf("no span %q in the trace: %v", name, names(spans))
		}
		if want, ok := services[name]; ok && out[0].Service != want {
			t.Errorf("span %q from %q, want %q", name, out[0].Service, want)
		}
		return out
	}
	for _, s := range spans {
		if s.ParentID == clientSpan {
			continue
		}
		if _, ok := byID[s.ParentID]; !ok {
			t.Errorf("span %q's parent %q is not in the trace", s.Name, s.ParentID)
		}
	}
	req := find("POST /v1/chat/completions")[0]
	if req.ParentID != clientSpan || req.Kind != 2 {
		t.Errorf("request span: parent %s kind %d, want the client's span %s, server", req.ParentID, req.Kind, clientSpan)
	}
	job := find("process chatworker")[0]
	if job.ParentID != req.SpanID || job.Kind != 5 || job.Attrs["messaging.system"] != "nats" {
		t.Errorf("the job's first step %v: want a consumer span under the request span %s", job, req.SpanID)
	}
	find("queued chatworker")
	models := find("chat sim-scripted")
	if len(models) != 2 {
		t.Errorf("%d model spans, want 2 (the search, then the answer)", len(models))
	}
	for _, m := range models {
		for k, want := range map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "sim-scripted"} {
			if m.Attrs[k] != want {
				t.Errorf("model span %s = %v, want %v", k, m.Attrs[k], want)
			}
		}
		for _, k := range []string{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.response.model", "gen_ai.response.finish_reasons"} {
			if m.Attrs[k] == nil {
				t.Errorf("model span has no %s: %v", k, m.Attrs)
			}
		}
		if m.Kind != 3 {
			t.Errorf("model span kind %d, want client", m.Kind)
		}
		if m.Attrs["gen_ai.input.messages"] != nil || m.Attrs["gen_ai.output.messages"] != nil {
			t.Errorf("model span carries content without the opt-in: %v", m.Attrs)
		}
	}
	search := find("web_search brave")[0]
	if search.Attrs["searchfleet.search.outcome"] != "paid" || search.Attrs["searchfleet.search.results"] == nil || search.Attrs["searchfleet.search.query"] != nil {
		t.Errorf("search span attributes: %v", search.Attrs)
	}
	if p := byID[search.ParentID]; p.Name != "process searchworker-brave" || byID[p.ParentID].Name != "process chatworker" {
		t.Errorf("the search's span is under %q (under %q), want the search worker's step under the chat worker's", p.Name, byID[p.ParentID].Name)
	}
	resume := find("process chatworker-resume")[0]
	if byID[resume.ParentID].Name != "web_search brave" {
		t.Errorf("the resume step is under %q, want the search", byID[resume.ParentID].Name)
	}
	find("finish hooks")
}
