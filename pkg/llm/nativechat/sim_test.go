package nativechat_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/nativechat"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// The caller plays Kimi's round trip with the simulator, whole and streamed: the same
// answer either way (the simulator refuses an echo that is not verbatim), and a
// streamed answer passes its text on up to the first line that cites, a prefix of
// the answer.
func TestKimiAgainstSimulator(t *testing.T) {
	t.Parallel()
	sim := simulator.New(simulator.Options{})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	c := nativechat.New(nativechat.Kimi, llm.NewClient("sim-kimi", srv.URL+"/v1", "k", nativechat.HTTPClient(srv.Client())))
	body := []byte(`{"model":"sim-scripted","messages":[{"role":"user","content":"Search the web for the latest news about NATS JetStream"}],` +
		`"tools":[{"type":"function","function":{"name":"web_search","parameters":{"type":"object"}}}]}`)

	whole, err := c.Complete(context.Background(), body, nil)
	if err != nil {
		t.Fatal(err)
	}
	var streamed strings.Builder
	deltas := 0
	live, err := c.Complete(context.Background(), body, func(d llm.Delta) { deltas++; streamed.WriteString(d.Text) })
	if err != nil {
		t.Fatal(err)
	}
	for name, comp := range map[string]*llm.Completion{"whole": whole, "streamed": live} {
		msg, n := native(t, comp.Message)
		content := text(msg["content"])
		// The simulator's pages are about the question: their linked titles repeat it.
		if !strings.HasPrefix(content, "(simulated answer) The search found:\n\n# [Search the web for the latest news about NATS JetStream") ||
			!strings.Contains(content, ")[1]") || !strings.Contains(content, ")[2]") || !strings.Contains(content, ")[3]") {
			t.Errorf("%s: content %q", name, content)
		}
		if n == nil || n.Requests != 1 || len(n.Sources) != 3 || comp.FinishReason != "stop" {
			t.Errorf("%s: finish %s, report %+v", name, comp.FinishReason, n)
		}
		if comp.Usage.PromptTokens != 178+8182 || comp.Usage.CompletionTokens != 1+1971 {
			t.Errorf("%s: usage %+v", name, comp.Usage)
		}
	}
	if text(mustField(t, whole.Message, "content")) != text(mustField(t, live.Message, "content")) {
		t.Error("the streamed answer differs from the whole one")
	}
	if deltas == 0 || streamed.String() != "(simulated answer) The search found:\n\n" {
		t.Errorf("streamed %d deltas: %q", deltas, streamed.String())
	}
	st := sim.Stats().Requests
	if st["model_native_search"] != 2 || st["model_kimi_echo"] != 2 {
		t.Errorf("simulator stats %v", st)
	}
}

func mustField(t *testing.T, msg []byte, k string) []byte {
	t.Helper()
	m, _ := native(t, msg)
	return m[k]
}

// The GLM caller with the simulator's GLM search, whole and streamed: the same answer.
func TestGLMAgainstSimulator(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(simulator.New(simulator.Options{}))
	t.Cleanup(srv.Close)
	c := nativechat.New(nativechat.GLM, llm.NewClient("sim-glm", srv.URL+"/v1", "k", nativechat.HTTPClient(srv.Client())))
	body := []byte(`{"model":"sim-scripted","messages":[{"role":"user","content":"搜索2025年4月的重要财经新闻"}],` +
		`"tools":[{"type":"function","function":{"name":"web_search","parameters":{"type":"object"}}}]}`)
	var answers []string
	for _, onDelta := range []func(llm.Delta){nil, func(llm.Delta) {}} {
		comp, err := c.Complete(context.Background(), body, onDelta)
		if err != nil {
			t.Fatal(err)
		}
		msg, n := native(t, comp.Message)
		answers = append(answers, text(msg["content"]))
		if n == nil || n.Requests != 1 || len(n.Sources) != 3 || comp.Usage.TotalTokens != 5067 {
			t.Errorf("report %+v, usage %+v", n, comp.Usage)
		}
	}
	// The answer quotes pages about the question, each cited.
	if answers[0] != answers[1] || !strings.Contains(answers[0], "搜索2025年4月的重要财经新闻, simulated result 1 of 5.[1]") || strings.Contains(answers[0], "ref_") {
		t.Errorf("answers %q", answers)
	}
}
