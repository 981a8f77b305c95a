package trace_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/internal/testkit/otlpsink"
	"github.com/searchfleet/searchfleet/pkg/trace"
)

// The client's trace and span ids; the job's trace is the client's.
const (
	clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpan  = "00f067aa0ba902b7"
	question    = "Search the web: who won the 2022 world cup? sim:engine=brave"
)

// A one-search job sent with a traceparent makes one trace, the client's: the
// ingress's request span under the client's span, and under it, parented across
// NATS, the chat worker's steps, the model calls with the GenAI attributes, the
// search worker's search and the finish hooks; no prompt or query text anywhere.
func TestOneJobOneTrace(t *testing.T) {
	sink := otlpsink.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+sink.HTTP)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	t.Setenv(trace.EnvUI, "http://traces.test/trace/{trace_id}")
	f := fleettest.Start(t)

	hdr := post(t, f.URL, question)
	if got := hdr.Get(trace.HeaderTraceID); got != clientTrace {
		t.Fatalf("%s = %q, want the client's trace %s", trace.HeaderTraceID, got, clientTrace)
	}
	spans := sink.Await(t, clientTrace, "finish hooks")
	otlpsink.CheckSearchJob(t, spans, clientSpan, nil)
	if raw := sink.Raw(); strings.Contains(raw, "world cup") {
		t.Errorf("the spans carry the question's text: %s", raw)
	}

	// The job's record names its trace, and its view links to the trace UI.
	body, _ := json.Marshal(map[string]any{"model": demo.Model, "messages": []any{map[string]any{"role": "user", "content": "Say hello."}}})
	req, _ := http.NewRequest(http.MethodPost, f.URL+"/v1/jobs", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+otherTrace+"-"+clientSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		ID       string `json:"id"`
		TraceID  string `json:"trace_id"`
		TraceURL string `json:"trace_url"`
	}
	json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	if v.TraceID != otherTrace || v.TraceURL != "http://traces.test/trace/"+otherTrace {
		t.Errorf("job view: trace_id %q, trace_url %q; want %s and its page", v.TraceID, v.TraceURL, otherTrace)
	}
	if j, err := f.Store.Jobs.GetJob(t.Context(), v.ID); err != nil || j.TraceID != otherTrace {
		t.Errorf("job record's trace: %+v, %v", j, err)
	}
}

const otherTrace = "5bf92f3577b34da6a3ce929d0e0e4737"

// post sends question as a synchronous chat completion with the client's
// traceparent and returns the response's headers.
func post(t *testing.T, url, q string) http.Header {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": demo.Model, "messages": []any{map[string]any{"role": "user", "content": q}}})
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+clientTrace+"-"+clientSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte("[1]")) {
		t.Fatalf("chat completion: %d %s", resp.StatusCode, b)
	}
	return resp.Header
}
