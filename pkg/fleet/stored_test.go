package fleet_test

import (
	"fmt"
	"testing"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// A job of every client protocol keeps its request as the client's codec decoded it:
// the canonical form with the client's protocol (format 2), never re-encoded as another
// protocol's request. With each model call encoded once by the model's codec from
// that form, a request is translated once on its way in and once per model call.
func TestJobsStoreTheirRequestInCanonicalForm(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	q := "Search the web: what is new in Go? sim:nosearch"
	for _, c := range []struct {
		path, body string
		protocol   wire.Protocol
	}{
		{"/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":%q}],"temperature":0.2}`, demo.Model, q), wire.OpenAIChat},
		{"/v1/responses", fmt.Sprintf(`{"model":%q,"instructions":"Be brief.","input":%q,"temperature":0.2}`, demo.Model, q), wire.OpenAIResponses},
		{"/v1/messages", fmt.Sprintf(`{"model":%q,"system":"Be brief.","max_tokens":512,"messages":[{"role":"user","content":%q}],"temperature":0.2}`, demo.Model, q), wire.AnthropicMessages},
	} {
		status, body, h := f.Do(t, "POST", c.path, c.body)
		if status != 200 {
			t.Fatalf("%s: %d %s", c.path, status, body)
		}
		job, err := f.Store.Jobs.GetJob(t.Context(), h.Get("X-Searchfleet-Job-Id"))
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		st, err := wire.DecodeStored(job.Request)
		if err != nil {
			t.Fatalf("%s: stored request unreadable: %v", c.path, err)
		}
		r := st.Request
		if st.Format != wire.StoredFormat || st.Protocol != c.protocol || r.System != "Be brief." || wire.LatestUserText(r.Messages) != q ||
			r.Temperature == nil || *r.Temperature != 0.2 {
			t.Errorf("%s: stored %s", c.path, job.Request)
		}
		if job.Question != q {
			t.Errorf("%s: the job lists %q", c.path, job.Question)
		}
	}
}
