package fleet_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
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
	waitResearch(t, f, resp.ID, func(r researchRun) bool { return len(r.Rounds) > 0 && r.Rounds[0].Questions[0].JobID != "" })
	if resp, err = c.Responses.Cancel(ctx(t), resp.ID); err != nil || resp.Status != responses.ResponseStatusCancelled {
		t.Fatalf("cancel: %v %+v", err, resp)
	}
	waitCancelled(t, f, resp.ID)
}

// stream true streams a research Response as the SDK's events, each with its
// sequence_number; a stream cut short resumes with responses.retrieve(stream,
// starting_after) from the next event, without repeats or gaps, to
// response.completed, whose message cites the run's sources; a stream made again from
// the start numbers every event as the first did.
func TestResearchResponsesStream(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	c := openaiClient(f)
	type seen struct {
		seq int64
		typ string
	}
	id := ""
	read := func(s interface {
		Next() bool
		Current() responses.ResponseStreamEventUnion
		Err() error
		Close() error
	}, stop func(responses.ResponseStreamEventUnion) bool) ([]seen, *responses.Response) {
		defer s.Close()
		var got []seen
		var final *responses.Response
		for s.Next() {
			ev := s.Current()
			got = append(got, seen{ev.SequenceNumber, ev.Type})
			if ev.Type == "response.created" {
				id = ev.AsResponseCreated().Response.ID
			}
			if ev.Type == "response.completed" {
				r := ev.AsResponseCompleted().Response
				final = &r
			}
			if stop(ev) {
				break
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		return got, final
	}
	first, _ := read(c.Responses.NewStreaming(ctx(t), researchParams("How do glaciers move?")), func(ev responses.ResponseStreamEventUnion) bool {
		return ev.Type == "response.output_item.done" // the first search, then the client goes away
	})
	if len(first) < 4 || first[0].typ != "response.created" || first[0].seq != 0 || !strings.HasPrefix(id, "rr_") {
		t.Fatalf("first stream: %v", first)
	}
	last := first[len(first)-1].seq
	rest, final := read(c.Responses.GetStreaming(ctx(t), id, responses.ResponseGetParams{StartingAfter: openai.Int(last)}), func(responses.ResponseStreamEventUnion) bool { return false })
	if len(rest) == 0 || rest[0].seq != last+1 || final == nil || final.Status != responses.ResponseStatusCompleted {
		t.Fatalf("resumed after %d: %v", last, rest)
	}
	all := append(first, rest...)
	for i, s := range all {
		if s.seq != int64(i) {
			t.Fatalf("event %d has sequence_number %d: %v", i, s.seq, all)
		}
	}
	calls, cites := 0, 0
	for _, it := range final.Output {
		switch it.Type {
		case "web_search_call":
			calls++
		case "message":
			for _, p := range it.AsMessage().Content {
				cites += len(p.Annotations)
			}
		}
	}
	if run := getResearch(t, f, id); calls == 0 || calls != run.Usage.Searches || cites == 0 {
		t.Fatalf("%d web_search_call items for %d searches, %d citations", calls, run.Usage.Searches, cites)
	}
	again, _ := read(c.Responses.GetStreaming(ctx(t), id, responses.ResponseGetParams{}), func(responses.ResponseStreamEventUnion) bool { return false })
	if fmt.Sprint(again) != fmt.Sprint(all) {
		t.Fatalf("the stream made again differs:\n%v\nfirst:\n%v", again, all)
	}
}

// A page a run's child read streams as what it is from its first event: a
// web_search_call whose action is open_page with the page's URL, never a search with
// an empty query; the run's own events name the read a fetch, with its URL.
func TestResearchStreamShowsPageReads(t *testing.T) {
	t.Parallel()
	f := fetchFleet(t)
	page := guidePage(t)
	body, _ := json.Marshal(map[string]any{"model": "research/sim-model", "background": true, "stream": true,
		"input": "How does the fleet read pages? sim:read=" + page, "reasoning": map[string]any{"effort": "medium"}})
	resp, err := http.Post(f.URL+"/v1/responses", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	id, reads, searches := "", 0, 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type     string `json:"type"`
			Response struct {
				ID string `json:"id"`
			} `json:"response"`
			Item struct {
				Type   string `json:"type"`
				Action struct {
					Type  string `json:"type"`
					Query string `json:"query"`
					URL   string `json:"url"`
				} `json:"action"`
			} `json:"item"`
		}
		if json.Unmarshal([]byte(data), &ev) != nil {
			continue
		}
		if ev.Type == "response.created" {
			id = ev.Response.ID
		}
		if ev.Item.Type != "web_search_call" || ev.Type != "response.output_item.added" && ev.Type != "response.output_item.done" {
			continue
		}
		switch a := ev.Item.Action; {
		case a.Type == "open_page" && a.URL != "":
			reads++
		case a.Type == "search" && a.Query != "":
			searches++
		default:
			t.Errorf("%s: a web_search_call with action %+v", ev.Type, a)
		}
	}
	if reads == 0 || searches == 0 || !strings.HasPrefix(id, "rr_") {
		t.Fatalf("run %s streamed %d page reads and %d searches", id, reads, searches)
	}
	code, evs, _ := f.Do(t, http.MethodGet, "/v1/research/"+id+"/events", nil)
	if code != http.StatusOK || !strings.Contains(string(evs), `"type":"fetch"`) {
		t.Fatalf("events: %d %s", code, evs)
	}
	for _, l := range strings.Split(string(evs), "\n") {
		if d, ok := strings.CutPrefix(l, "data: "); ok && strings.Contains(d, `"type":"search"`) && strings.Contains(d, `"query":""`) {
			t.Errorf("a search event with no query: %s", d)
		}
	}
}
