package search

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"slices"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/fetch"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Address is the content address of a search: the hex SHA-256 of the engine id and
// the normalized query (text, recency, count, domain filters, language and country).
// A job's recorded results are kept under it, so a replay of the job, or a second
// identical search of the same job or batch, finds the result without searching.
// Domain lists are compared as sets and the text and hints case- and space-
// insensitively where engines treat them so; the query text keeps its case.
func Address(engine string, q engines.Query) string {
	norm := func(ds []string) []string {
		out := make([]string, 0, len(ds))
		for _, d := range ds {
			out = append(out, strings.ToLower(strings.TrimSpace(d)))
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	count := q.Count
	if count == 0 {
		count = engines.DefaultCount
	}
	b, _ := json.Marshal([]any{"search.v1", engine, strings.TrimSpace(q.Query), string(q.Recency), count,
		norm(q.AllowedDomains), norm(q.BlockedDomains), strings.ToLower(q.Language), strings.ToUpper(q.Country)})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Complete reports whether a result may be recorded or cached: a finished, successful
// search. A failed one (an error result the model reads) never is: a replay or a cache
// hit would hand a transient failure on as if it were the web's answer.
func Complete(res *engines.Result) bool {
	return res != nil && res.Citation.Error == nil
}

// recording is what a call's outcome records with it (Calls.SaveSearchDone): a
// complete result (rb its JSON) under its content address, among its job's (and its
// batch's) recorded results, for the job's retention; nil for a result that is not
// Complete. It is stored with the outcome, before the result is published, so the
// chain's next hop finds it.
func recording(req Request, res *engines.Result, rb []byte) *state.Recording {
	if !Complete(res) {
		return nil
	}
	// Under the engine the call was made for, even when a fallback answered it: that
	// is the address the call's replay looks up.
	return &state.Recording{Addr: Address(req.origin(), req.Query), Result: rb}
}

// cacheable reads a cached result: one that is not Complete (written before the cache
// refused failures) is not used.
func cacheable(b []byte) (*engines.Result, bool) {
	var res engines.Result
	if json.Unmarshal(b, &res) != nil || !Complete(&res) {
		return nil, false
	}
	return &res, true
}

// FetchAddress is the content address of a web_fetch of rawURL: the hex SHA-256 of
// the URL with its scheme and host in lower case and its fragment dropped (neither
// changes the page a server sends). A job's fetched pages are recorded under it
// beside its searches, so a replay of the job reads the same pages, and a second
// fetch of the same URL in the job (or its batch) reads the first one's page.
func FetchAddress(rawURL string) string {
	u := strings.TrimSpace(rawURL)
	if p, err := url.Parse(u); err == nil && p.Scheme != "" && p.Host != "" {
		p.Scheme, p.Host, p.Fragment, p.RawFragment = strings.ToLower(p.Scheme), strings.ToLower(p.Host), "", ""
		u = p.String()
	}
	b, _ := json.Marshal([]any{"fetch.v1", u})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// FetchRecord is a recorded fetch: what the chat worker renders for the model (the
// page as a result, and the page itself) when it answers a fetch from the record.
type FetchRecord struct {
	Result engines.Result `json:"fetch_result"`
	Page   *fetch.Page    `json:"page"`
}

// Recordable reports whether a fetch's page may be recorded: a page the server
// answered with, readable or not (a js_shell or empty page is what the URL serves, so
// a replay is given it too); never a failed fetch, which a replay or a repeated
// fetch would otherwise take for the page.
func Recordable(p *fetch.Page) bool {
	return p != nil && p.Error == nil
}

// ReadFetchRecord decodes a recorded fetch; ok is false for anything else (a recorded
// search, or a fetch that could not be recorded whole).
func ReadFetchRecord(b []byte) (*FetchRecord, bool) {
	var r FetchRecord
	if json.Unmarshal(b, &r) != nil || !Recordable(r.Page) || !Complete(&r.Result) || r.Result.Engine != FetchEngine {
		return nil, false
	}
	return &r, true
}

// fetchRecording is what a fetch's outcome records with it (Calls.SaveSearchDone): a
// recordable page under its content address, among its job's (and its batch's)
// recorded results, before the page is published; nil for a page that is not
// recorded.
func fetchRecording(req FetchRequest, done *Done) *state.Recording {
	if !Recordable(done.Page) || !Complete(&done.Result) {
		return nil
	}
	b, err := json.Marshal(FetchRecord{Result: done.Result, Page: done.Page})
	if err != nil {
		return nil
	}
	return &state.Recording{Addr: FetchAddress(req.URL), Result: b}
}
