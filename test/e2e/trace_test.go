package e2e_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/otlpsink"
	"github.com/searchfleet/searchfleet/pkg/trace"
)

// With the roles in separate processes — the ingress and the search worker
// exporting OTLP over HTTP/protobuf, the chat worker over gRPC, each to a real OTLP
// receiver — a one-search job sent with a traceparent is still one trace, the
// client's, each span from the process that made it, parented across NATS.
func TestTraceAcrossProcesses(t *testing.T) {
	t.Parallel()
	sink := otlpsink.Start(t)
	c := newCluster(t)
	otel := []string{"OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_TRACES_SAMPLER=always_on"}
	httpOTLP := append([]string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + sink.HTTP}, otel...)
	c.env = append(c.env, httpOTLP...)
	c.startIngress()
	c.start("chatworker", "chatworker", "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+sink.GRPC, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc")
	c.start("searchworker", "searchworker")

	const traceID, spanID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	body, _ := json.Marshal(map[string]any{"model": demo.Model, "messages": []any{map[string]any{"role": "user",
		"content": "Search the web: who won the 2022 world cup? sim:engine=brave"}}})
	req, _ := http.NewRequest(http.MethodPost, c.url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+spanID+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chat completion: %d %s", resp.StatusCode, b)
	}
	if got := resp.Header.Get(trace.HeaderTraceID); got != traceID {
		t.Fatalf("%s = %q, want the client's %s", trace.HeaderTraceID, got, traceID)
	}
	spans := sink.Await(t, traceID, "finish hooks")
	otlpsink.CheckSearchJob(t, spans, spanID, map[string]string{
		"POST /v1/chat/completions": "searchfleet-ingress",
		"process chatworker":        "searchfleet-chatworker",
		"chat sim-scripted":         "searchfleet-chatworker",
		"web_search brave":          "searchfleet-searchworker",
		"finish hooks":              "searchfleet-ingress",
	})
	if raw := sink.Raw(); strings.Contains(raw, "world cup") {
		t.Errorf("the spans carry the question's text")
	}
}
