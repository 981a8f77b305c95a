package fleet_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
)

func researchParams(q string) responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: "research/sim-model", Background: openai.Bool(true),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(q)},
		Tools: []responses.ToolUnionParam{responses.ToolParamOfWebSearch(responses.WebSearchToolTypeWebSearch)}}
}

// The openai SDK's deep-research flow works unchanged: responses.create with
// background true and a research model starts a run, responses.retrieve polls it to
// completed, and the Response holds one web_search_call per search the children made
// and the report as a message whose every url_citation is a source the run searched.
func TestResearchResponsesSDK(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	c := openaiClient(f)
	resp, err := c.Responses.New(ctx(t), researchParams("How do vaccines work?"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.ID, "rr_") || resp.Status != responses.ResponseStatusQueued && resp.Status != responses.ResponseStatusInProgress {
		t.Fatalf("created: %s %s", resp.ID, resp.Status)
	}
	for deadline := time.Now().Add(60 * time.Second); resp.Status != responses.ResponseStatusCompleted; {
		if time.Now().After(deadline) || resp.Status == responses.ResponseStatusFailed {
			t.Fatalf("response %s: %s", resp.ID, resp.Status)
		}
		time.Sleep(100 * time.Millisecond)
		if resp, err = c.Responses.Get(ctx(t), resp.ID, responses.ResponseGetParams{}); err != nil {
			t.Fatal(err)
		}
	}
	run := getResearch(t, f, resp.ID)
	searched := map[string]bool{}
	for _, rd := range run.Rounds {
		for _, q := range rd.Questions {
			for _, s := range q.Sources {
				searched[s.URL] = true
			}
		}
	}
	calls, cites := 0, 0
	for _, it := range resp.Output {
		switch it.Type {
		case "web_search_call":
			calls++
			if ws := it.AsWebSearchCall(); ws.Status != "completed" || ws.Action.Query == "" {
				t.Errorf("web_search_call %+v", ws)
			}
		case "message":
			for _, part := range it.AsMessage().Content {
				for _, a := range part.Annotations {
					cites++
					if a.Type != "url_citation" || !searched[a.URL] {
						t.Errorf("annotation %+v is not a source the run searched", a)
					}
					if got := span(part.Text, int(a.StartIndex), int(a.EndIndex)); !strings.HasPrefix(got, "[") {
						t.Errorf("annotation spans %q", got)
					}
				}
			}
		}
	}
	if calls != run.Usage.Searches || calls == 0 || cites == 0 {
		t.Fatalf("%d web_search_call items for %d searches, %d citations", calls, run.Usage.Searches, cites)
	}
}

// span is text's code points start..end.
func span(text string, start, end int) string {
	r := []rune(text)
	if start < 0 || end > len(r) || start > end {
		return ""
	}
	return string(r[start:end])
}

// responses.cancel on a running research Response ends it and its children
// cancelled.
func TestResearchResponsesCancel(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	setFault(t, f, map[string]any{"prefix": "/", "slow": "1500ms"})
	c := openaiClient(f)
	resp, err := c.Responses.New(ctx(t), researchParams("Why do leaves change colour?"))
	if err != nil {
		t.Fatal(err)
	}
	run := waitResearch(t, f, resp.ID, func(r researchRun) bool { return len(r.Rounds) > 0 && r.Rounds[0].Questions[0].JobID != "" })
	if resp, err = c.Responses.Cancel(ctx(t), resp.ID); err != nil || resp.Status != responses.ResponseStatusCancelled {
		t.Fatalf("cancel: %v %+v", err, resp)
	}
	run = waitResearch(t, f, resp.ID, ended)
	if run.Status != "cancelled" {
		t.Fatalf("run %s", run.Status)
	}
	for _, q := range run.Rounds[0].Questions {
		fleettest.Eventually(t, "child cancelled", func() bool {
			_, b, _ := f.Do(t, http.MethodGet, "/v1/jobs/"+q.JobID, nil)
			return strings.Contains(string(b), `"status":"cancelled"`)
		})
	}
}
