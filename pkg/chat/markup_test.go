package chat_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/internal/fixtures"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// liveTag matches what an HTML parser would open an element (or a comment, a
// processing instruction) at.
var liveTag = regexp.MustCompile(`<[A-Za-z/!?]`)

// hostileTitles are titles a search provider may send: markup encoded as entities
// (decoded once or twice), tags nested so that stripping once leaves a tag, and an
// invisible character that hides a tag until it is removed.
var hostileTitles = []string{
	`&lt;script&gt;alert(1)&lt;/script&gt;Tokio`,
	`&amp;lt;img src=x onerror=alert(1)&amp;gt; Tokio`,
	`<<b>script>alert(1)<</b>/script> Tokio`,
	`&lt;&#8203;svg onload=alert(1)&gt; Tokio`,
	`&#60;iframe src=javascript:alert(1)&#62; Tokio`,
}

// A result title carrying markup, encoded or not, reaches no client as a live tag:
// not in the Chat answer's annotations and sources, not in the Responses
// web_search_call and url_citation, not in the Messages web_search_tool_result. The
// result is made by a real engine (SearXNG's reader, over HTTP), as a search worker
// makes it.
func TestCitationTitlesCarryNoMarkupOnAnyProtocol(t *testing.T) {
	t.Parallel()
	for _, title := range hostileTitles {
		t.Run(title, func(t *testing.T) {
			t.Parallel()
			res := hostileResult(t, title)
			h := newHarness(t, []func(http.ResponseWriter){calls(webSearch("c1", "tokio runtime")), text("Tokio is a runtime [1].")})
			h.submit("j1", "Search the web: what is tokio?")
			if err := h.job("j1", 1); err != nil {
				t.Fatal(err)
			}
			reqs := h.pub.searches()
			if len(reqs) != 1 {
				t.Fatalf("%d searches", len(reqs))
			}
			done := answerSearch(reqs[0])
			done.Result = *res
			if err := h.resume(done, 1); err != nil {
				t.Fatal(err)
			}
			j := h.ended("j1")
			resp, err := openaichat.Client.DecodeResponse(j.Response)
			if err != nil {
				t.Fatal(err)
			}
			if err := resp.AddTrace(j.Trace); err != nil {
				t.Fatal(err)
			}
			for name, codec := range map[string]interface {
				EncodeResponse(*wire.Response) ([]byte, error)
			}{"chat": openaichat.Client, "responses": responses.Client, "messages": anthropic.Client} {
				b, err := codec.EncodeResponse(resp)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				var v any
				if err := json.Unmarshal(b, &v); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				titles := 0
				walkStrings(v, "", func(path, s string) {
					if liveTag.MatchString(s) {
						t.Errorf("%s: %s carries live markup: %q", name, path, s)
					}
					if strings.HasSuffix(path, ".title") && strings.Contains(s, "Tokio") {
						titles++
					}
				})
				if titles == 0 {
					t.Errorf("%s: no citation title kept the text: %s", name, b)
				}
			}
			if liveTag.Match(j.Trace) {
				t.Errorf("the job's trace carries live markup: %s", j.Trace)
			}
		})
	}
}

// hostileResult runs the SearXNG engine against a recorded answer whose first
// result's title is title.
func hostileResult(t *testing.T, title string) *engines.Result {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal(fixtures.Read("searxng/docs-shape-search.CONSTRUCTED.json"), &body); err != nil {
		t.Fatal(err)
	}
	results := body["results"].([]any)
	results[0].(map[string]any)["title"] = title
	results[0].(map[string]any)["content"] = title + " is an asynchronous runtime."
	b, _ := json.Marshal(body)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	reg, err := engines.FromConfig([]engines.Config{{ID: "searxng", Kind: "searxng", BaseURL: srv.URL}}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	eng, _ := reg.Get("searxng")
	res, err := eng.Search(t.Context(), engines.Query{Query: "tokio runtime", Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// walkStrings calls f with every string of a decoded JSON value and its path.
func walkStrings(v any, path string, f func(path, s string)) {
	switch x := v.(type) {
	case string:
		f(path, x)
	case []any:
		for _, e := range x {
			walkStrings(e, path+"[]", f)
		}
	case map[string]any:
		for k, e := range x {
			walkStrings(e, path+"."+k, f)
		}
	}
}
