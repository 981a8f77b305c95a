package ingress

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/research"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// A Responses request whose model is a research model ("research/sim-model") is a
// research run in the Responses API's deep-research shape: created with background
// true, polled with GET /v1/responses/{id} (queued → in_progress → completed),
// cancelled with POST /v1/responses/{id}/cancel; the completed Response holds one
// web_search_call item per search the run's children made and the report as a
// message whose url_citation annotations point at the run's sources. With stream
// true the run is streamed as Responses events (a web_search_call item per search as
// its child ends, the report's message at the end), each with a sequence_number;
// GET /v1/responses/{id}?stream=true&starting_after=N streams it again from after
// event N. The events are a function of the run's record, so every stream of a run
// numbers them alike: a resumed stream repeats and skips nothing.

// researchResponse starts a run for a Responses request that names a research model;
// it reports false (and answers nothing) for any other request.
func (s *Server) researchResponse(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if s.Research == nil {
		return false
	}
	var in struct {
		Model        string            `json:"model"`
		Input        json.RawMessage   `json:"input"`
		Instructions string            `json:"instructions"`
		Background   bool              `json:"background"`
		Stream       bool              `json:"stream"`
		Metadata     map[string]string `json:"metadata"`
		Reasoning    *struct {
			Effort string `json:"effort"`
		} `json:"reasoning"`
		Text *struct {
			Format *struct {
				Type   string          `json:"type"`
				Schema json.RawMessage `json:"schema"`
			} `json:"format"`
		} `json:"text"`
	}
	if json.Unmarshal(body, &in) != nil {
		return false
	}
	agentName := s.Research.AgentOfModel(in.Model)
	if agentName == "" && !strings.HasPrefix(in.Model, research.ModelPrefix) {
		return false
	}
	fail := func(status int, param, msg string) bool {
		writeWireError(w, responses.Client, &wire.Error{Status: status, Type: "invalid_request_error", Param: param, Message: msg})
		return true
	}
	if !in.Background {
		return fail(http.StatusBadRequest, "background", "A research model runs in the background: set background to true and poll the response.")
	}
	input, err := research.InputText(in.Input)
	if err != nil {
		return fail(http.StatusBadRequest, "input", err.Error())
	}
	req := &research.Request{Input: input, Model: in.Model, Agent: agentName, Instructions: in.Instructions, Metadata: in.Metadata, Surface: "responses"}
	if in.Reasoning != nil {
		switch in.Reasoning.Effort {
		case "low", "medium", "high":
			req.Effort = in.Reasoning.Effort
		}
	}
	if in.Text != nil && in.Text.Format != nil && in.Text.Format.Type == "json_schema" {
		req.OutputSchema = in.Text.Format.Schema
	}
	run, _, _, ok := s.startResearch(w, r, req, nil, false)
	if !ok {
		return true
	}
	if in.Stream {
		s.streamRunResponse(w, r, run, -1)
		return true
	}
	s.writeRunResponse(w, r, run)
	return true
}

// getResearchResponse answers GET /v1/responses/{id} for a run's id: the Response,
// or with stream=true (in the query, or {"stream": true} in the body as SDKs send
// it) its events from after starting_after.
func (s *Server) getResearchResponse(w http.ResponseWriter, r *http.Request) {
	run, ok := s.runForResponse(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	var in struct {
		Stream bool `json:"stream"`
	}
	if r.ContentLength != 0 && r.Body != nil {
		json.NewDecoder(io.LimitReader(r.Body, 4<<10)).Decode(&in)
	}
	if !in.Stream && q.Get("stream") != "true" {
		s.writeRunResponse(w, r, run)
		return
	}
	after := -1
	if v := q.Get("starting_after"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeWireError(w, responses.Client, &wire.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: "starting_after",
				Message: "starting_after is the sequence_number of an event: a whole number from 0."})
			return
		}
		after = n
	}
	s.streamRunResponse(w, r, run, after)
}

// streamRunResponse streams a run as Responses events from after sequence number
// after until it ends (or the stream's time is up: resume with starting_after). The
// events are made again from the start every time, by one wire.Stream fed the run as
// it grows: the searches so far, then at the end the report (Finish) or the failure.
func (s *Server) streamRunResponse(w http.ResponseWriter, r *http.Request, run *state.Run, after int) {
	ctx, done, ok := s.openStream(w, r, responses.Client, run.Tenant)
	if !ok {
		return
	}
	defer done()
	rc := startSSE(w)
	last := time.Now()
	send := func(evs []wire.Event) {
		var out []wire.Event
		for _, e := range evs {
			var n struct {
				Seq int `json:"sequence_number"`
			}
			if json.Unmarshal(e.Data, &n) == nil && n.Seq > after {
				out = append(out, e)
			}
		}
		if len(out) > 0 {
			wire.WriteSSE(w, out)
			rc.Flush()
			last = time.Now()
		}
	}
	st := responses.Client.NewStream()
	tick := time.NewTicker(researchPoll)
	defer tick.Stop()
	for started := false; ; started = true {
		resp, err := s.runResponse(r, run)
		if err != nil {
			return
		}
		if !started {
			base := *resp
			base.Content, base.Sources = nil, nil
			send(st.Start(&base))
		}
		searches := *resp
		searches.Content = slices.DeleteFunc(slices.Clone(resp.Content), func(p wire.Part) bool { return p.Kind == wire.PartText })
		send(st.Update(&searches))
		switch resp.Status {
		case wire.StatusCompleted:
			send(st.Finish(resp))
			return
		case wire.StatusFailed:
			send(st.Fail(resp, resp.Error))
			return
		case wire.StatusCancelled:
			return // no event says cancelled: the stream ends, and the Response says so
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if time.Since(last) >= keepAliveEvery {
			wire.WriteSSE(w, st.KeepAlive())
			rc.Flush()
			last = time.Now()
		}
		if run, err = s.Research.Store.Research.GetRun(ctx, run.ID); err != nil {
			return
		}
	}
}

// cancelResearchResponse answers POST /v1/responses/{id}/cancel for a run's id: the
// run ends cancelled and its children are cancelled.
func (s *Server) cancelResearchResponse(w http.ResponseWriter, r *http.Request) {
	run, ok := s.runForResponse(w, r)
	if !ok {
		return
	}
	if _, err := s.Research.Cancel(r.Context(), run.Tenant, run.ID); err != nil {
		writeWireError(w, responses.Client, unavailable("Cancelling"))
		return
	}
	if got, err := s.Research.Store.Research.GetRun(r.Context(), run.ID); err == nil {
		run = got
	}
	s.writeRunResponse(w, r, run)
}

func (s *Server) runForResponse(w http.ResponseWriter, r *http.Request) (*state.Run, bool) {
	id := r.PathValue("id")
	err := state.ErrNotFound
	var run *state.Run
	if s.Research != nil {
		run, err = s.Research.Get(r.Context(), tenantOf(r), id)
	}
	if errors.Is(err, state.ErrNotFound) {
		writeWireError(w, responses.Client, &wire.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "id",
			Message: fmt.Sprintf("No response with id %q.", redact.Clip(id, 64))})
		return nil, false
	}
	if err != nil {
		writeWireError(w, responses.Client, unavailable("Reading the response"))
		return nil, false
	}
	return run, true
}

// maxRunSearchItems bounds the web_search_call items of a run's Response.
const maxRunSearchItems = 1000

// writeRunResponse renders a run as a Responses response.
func (s *Server) writeRunResponse(w http.ResponseWriter, r *http.Request, run *state.Run) {
	resp, err := s.runResponse(r, run)
	if err != nil {
		writeWireError(w, responses.Client, unavailable("Reading the response"))
		return
	}
	writeResponse(w, responses.Client, resp)
}

// runStatuses are the Response statuses of a research run's (any other: in progress).
var runStatuses = map[string]wire.Status{state.RunQueued: wire.StatusQueued, state.RunCompleted: wire.StatusCompleted,
	state.RunFailed: wire.StatusFailed, state.RunCancelled: wire.StatusCancelled}

// runResponse is a run as a Responses response: its searches and page reads so far
// as server calls, and once completed its report as the message.
func (s *Server) runResponse(r *http.Request, run *state.Run) (*wire.Response, error) {
	v := research.ViewOf(run)
	resp := &wire.Response{ID: run.ID, JobID: run.ID, Model: v.Model, Created: run.Created, Finished: run.Finished,
		Status: cmp.Or(runStatuses[run.Status], wire.StatusInProgress), // a plan under review is in progress
		Echo:   map[string]json.RawMessage{"background": json.RawMessage("true")}}
	if run.Status == state.RunFailed {
		var e struct{ Code, Message string }
		json.Unmarshal(run.Error, &e)
		resp.Error = &wire.Error{Code: e.Code, Message: e.Message}
	}
	evs, err := s.Research.Store.Research.RunEvents(r.Context(), run.ID, 0, 10_000)
	if err != nil {
		return nil, err
	}
	for _, e := range evs {
		var ev struct {
			Type  string `json:"type"`
			Query string `json:"query"`
			URL   string `json:"url"`
			Error string `json:"error"`
		}
		if json.Unmarshal(e.Data, &ev) != nil || ev.Type != "search" && ev.Type != "fetch" || resp.Usage.WebSearches >= maxRunSearchItems {
			continue
		}
		id := "rr" + strconv.Itoa(e.Seq)
		call := &wire.ServerCall{ID: id, Query: ev.Query}
		if ev.Type == "fetch" {
			call = &wire.ServerCall{ID: id, Name: wire.FetchName, URL: ev.URL}
		}
		resp.Content = append(resp.Content, wire.Part{Kind: wire.PartServerCall, Server: call})
		res := &wire.SearchResult{CallID: id}
		if ev.Error != "" {
			res.Error = &wire.SearchError{Code: "unavailable"}
		}
		resp.Content = append(resp.Content, wire.Part{Kind: wire.PartServerResult, Search: res})
		if ev.Type == "search" {
			resp.Usage.WebSearches++
		}
	}
	resp.Usage.Spend = runSpend(run, &v)
	if v.Output != nil && resp.Status == wire.StatusCompleted {
		resp.Content = append(resp.Content, wire.Part{Kind: wire.PartText, Text: v.Output.Report, Citations: runCitations(v.Output.Report, v.Output.Sources)})
		for _, src := range v.Output.Sources {
			resp.Sources = append(resp.Sources, wire.Source{URL: src.URL, Title: src.Title})
		}
	}
	return resp, nil
}

// runCitations are a report's [n] markers as citations of its sources, each spanning
// its marker (character offsets).
func runCitations(report string, sources []research.Source) []wire.Citation {
	var out []wire.Citation
	for i := 0; i < len(report); i++ {
		if report[i] != '[' {
			continue
		}
		j := i + 1
		for j < len(report) && j-i <= 3 && report[j] >= '0' && report[j] <= '9' {
			j++
		}
		if j == i+1 || j >= len(report) || report[j] != ']' {
			continue
		}
		n, _ := strconv.Atoi(report[i+1 : j])
		if n < 1 || n > len(sources) || i > 0 && report[i-1] == '\n' && strings.HasPrefix(report[j:], "](") {
			continue
		}
		start := utf8.RuneCountInString(report[:i])
		out = append(out, wire.Citation{URL: sources[n-1].URL, Title: sources[n-1].Title, Start: start, End: start + utf8.RuneCountInString(report[i:j+1])})
		i = j
	}
	return out
}
