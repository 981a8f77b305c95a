package chaos

import (
	"bytes"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// recorder stands in front of the provider simulator and remembers every paid call —
// its route, the job it belongs to (by the tag in the text), the hash the simulator's
// repeat counter uses, and when it started and ended — so a repeated call can be told
// apart: repeated because its caller died while it was in flight (allowed), or not.
type recorder struct {
	sim    *simulator.Server
	jitter time.Duration // up to this much extra latency per call, uniformly

	mu    sync.Mutex
	calls []paidCall
}

type paidCall struct {
	route      string // "model", or the engine kind
	tag        string // the job's tag, "" if none was found
	hash       [32]byte
	start, end time.Time
	// abandoned: the caller went away before the answer was written (it was killed,
	// or its own timeout ended the call).
	abandoned bool
}

// tagRE finds a job's tag in a request body: every submission's text carries one.
var tagRE = regexp.MustCompile(`chaosjob-[a-z0-9]+-[a-z0-9-]+-[0-9]+`)

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	route := routeOf(r)
	if route == "" {
		rc.sim.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	r.Body = io.NopCloser(bytes.NewReader(body))
	// The simulator's own hash: route, body, raw query.
	h := sha256.New()
	h.Write([]byte(route))
	h.Write(body)
	h.Write([]byte(r.URL.RawQuery))
	c := paidCall{route: route, tag: string(tagRE.Find(body)), start: time.Now()}
	if c.tag == "" {
		// Engines that search with GET carry the query in the URL.
		q, _ := url.QueryUnescape(r.URL.RawQuery)
		c.tag = tagRE.FindString(q)
	}
	copy(c.hash[:], h.Sum(nil))
	if rc.jitter > 0 {
		select {
		case <-time.After(rand.N(rc.jitter)):
		case <-r.Context().Done():
		}
	}
	rc.sim.ServeHTTP(w, r)
	c.end = time.Now()
	c.abandoned = r.Context().Err() != nil
	rc.mu.Lock()
	rc.calls = append(rc.calls, c)
	rc.mu.Unlock()
}

// routeOf names a paid route as the simulator's counters do: "model" for the main
// model, the engine kind (the first path segment) for engines; "" for the rest.
func routeOf(r *http.Request) string {
	p := strings.TrimPrefix(r.URL.Path, "/")
	switch {
	case p == "v1/chat/completions":
		return "model"
	case strings.HasPrefix(p, "_sim") || strings.HasPrefix(p, "v1/") || p == "":
		return ""
	}
	kind, _, _ := strings.Cut(p, "/")
	return kind
}

// snapshot returns the calls recorded so far, ordered by start.
func (rc *recorder) snapshot() []paidCall {
	rc.mu.Lock()
	out := slices.Clone(rc.calls)
	rc.mu.Unlock()
	slices.SortFunc(out, func(a, b paidCall) int { return a.start.Compare(b.start) })
	return out
}

// repeat is a paid call whose exact request had been made before.
type repeat struct {
	call    paidCall
	excused bool
	// why says what excuses it: "killed <process>" (a process of the caller's role
	// was killed while an earlier identical call was in flight), or "abandoned" (the
	// caller gave up on the earlier call before its answer — its own timeout — so
	// asking again is a retry of a call that never answered).
	why string
}

// repeats lists every repeated call. A repeat is excused when, while an earlier
// identical call was in flight (or within grace after it answered, before its caller
// could store the answer), a process of the caller's role was killed — the model's
// caller is a chat worker, an engine's a search worker — or when the caller abandoned
// the earlier call before it answered.
func repeats(calls []paidCall, tl []incident, grace time.Duration) []repeat {
	seen := map[[32]byte][]paidCall{}
	var out []repeat
	for _, c := range calls {
		prev := seen[c.hash]
		seen[c.hash] = append(prev, c)
		if len(prev) == 0 {
			continue
		}
		role := "search"
		if c.route == "model" {
			role = "chat"
		}
		rp := repeat{call: c}
		for _, p := range prev {
			for _, in := range tl {
				if in.kind == "kill" && in.role == role && !in.at.Before(p.start) && !in.at.After(p.end.Add(grace)) {
					rp.excused, rp.why = true, "killed "+in.target
				}
			}
			if !rp.excused && p.abandoned {
				rp.excused, rp.why = true, "abandoned"
			}
		}
		out = append(out, rp)
	}
	return out
}
