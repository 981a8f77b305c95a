package chaos

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Row is one scenario's figures.
type Row struct {
	Scenario string
	Chaos    string
	Elapsed  time.Duration

	// Submitted jobs; Accepted got a 2xx (on some attempt); Unaccepted never did.
	Submitted, Accepted, Unaccepted int
	// Completed and Failed (cancelled included) count accepted jobs by their outcome.
	Completed, Failed int
	// Lost: accepted, and never ended — no terminal status, no terminal event.
	Lost int
	// Contradictory: more than one terminal webhook id, terminal events that
	// disagree, or a record, event and webhook that name different outcomes.
	Contradictory int
	// NoWebhook: ended, but no signed terminal webhook arrived. NoEvent: ended, but
	// EVENTS holds no terminal event for it.
	NoWebhook, NoEvent int
	// Poisoned: the client gave up on a key that was answered 409
	// idempotency_key_in_use (and never 2xx). DupJobs: a key answered with more than one job id.
	// RepostMismatch: re-posting the key after the run did not answer the same job.
	Poisoned, DupJobs, RepostMismatch int
	// NeverRan: failed without the main model ever being called for it.
	NeverRan int
	// Repeats is the simulator's repeat counter (paid calls whose request repeated an
	// earlier one exactly); Unexcused are those not explained by their caller dying
	// with the earlier one in flight.
	Repeats, Unexcused int
	// Orphans: jobs in flight when Redis was restarted empty; OrphansDLQ of them have
	// a dead letter; OrphanPaid are paid calls made for orphans after the wipe.
	Orphans, OrphansDLQ, OrphanPaid int
	// BadSignatures counts webhook deliveries whose signature did not verify.
	BadSignatures int
	// Problems lists the failed checks with examples.
	Problems []string
}

// OK reports whether the scenario lost nothing and contradicted nothing.
func (r Row) OK() bool { return len(r.Problems) == 0 }

func (r Row) verdict() string {
	if r.OK() {
		return fmt.Sprintf("PASS (%d accepted, %d completed, %d failed, %d repeats all excused)", r.Accepted, r.Completed, r.Failed, r.Repeats)
	}
	return "FAIL: " + strings.Join(r.Problems, "; ")
}

// check looks at every job of a scenario.
func check(ctx context.Context, sc scenario, r *rig, cl *client, subs []*submission, wipeAt time.Time, what string) (Row, error) {
	row := Row{Scenario: sc.name, Chaos: what, Submitted: len(subs)}
	facts, err := readStreams(ctx, "nats://"+hostPort(r.natsPort))
	if err != nil {
		return row, err
	}
	calls := r.rec.snapshot()
	modelCalls := map[string]int{}
	for _, c := range calls {
		if c.route == "model" {
			modelCalls[c.tag]++
		}
	}
	tl := r.timeline()
	reps := repeats(calls, tl, 2*time.Second)
	st := r.sim.Stats()
	for route, n := range st.Duplicates {
		if route != "model_offered_web_search" {
			row.Repeats += int(n)
		}
	}
	var unexcused []string
	for _, rp := range reps {
		if !rp.excused {
			row.Unexcused++
			unexcused = append(unexcused, rp.call.route+" "+rp.call.tag)
		}
	}
	dlqJobs := map[string]int{}
	for _, d := range facts.dlq {
		dlqJobs[d.job]++
	}

	// Each accepted job's record, read through the API (16 at a time).
	type result struct {
		status string
		code   int
		err    error
	}
	records := make([]result, len(subs))
	reposts := make([]string, len(subs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, s := range subs {
		id := s.jobID()
		if id == "" {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			st, code, err := cl.getJob(ctx, id)
			records[i] = result{st, code, err}
			if sc.research {
				return // a research run is shared while it runs: a re-post now starts another
			}
			// The re-post: the same key and body must answer the same job.
			status, ecode, rid, err := cl.post(ctx, s)
			switch {
			case err != nil:
				reposts[i] = "error " + err.Error()
			case status < 200 || status > 299:
				reposts[i] = fmt.Sprintf("%d %s", status, ecode)
			case rid != id:
				reposts[i] = "another job " + rid
			}
		}()
	}
	wg.Wait()

	ex := map[string][]string{}
	add := func(what, example string) {
		if len(ex[what]) < 3 {
			ex[what] = append(ex[what], example)
		}
	}
	for i, s := range subs {
		id := s.jobID()
		if id == "" {
			row.Unaccepted++
			if s.inUse > 0 {
				row.Poisoned++
				add("poisoned keys", fmt.Sprintf("%s after %d attempts [%s]", s.key, s.attempts, strings.Join(s.history, "; ")))
			} else {
				add("never accepted", fmt.Sprintf("%s after %d attempts [%s]", s.key, s.attempts, strings.Join(s.history, "; ")))
			}
			continue
		}
		row.Accepted++
		if len(s.ids) > 1 {
			row.DupJobs++
			add("keys answered with several jobs", s.key+" → "+strings.Join(s.ids, ","))
		}
		rec := records[i]
		evs := facts.terminal[id]
		hk := r.recv.get(id)
		if sc.wipes && s.acceptedAt.Before(wipeAt.Add(time.Second)) {
			endedBefore := false
			for _, e := range evs {
				if e.at.Before(wipeAt) {
					endedBefore = true
				}
			}
			if !endedBefore && hk != nil && hk.first.Before(wipeAt) {
				endedBefore = true
			}
			if !endedBefore && rec.code == http.StatusNotFound {
				row.Orphans++
				if dlqJobs[id] > 0 {
					row.OrphansDLQ++
				} else {
					add("orphans not dead-lettered", id)
				}
				for _, c := range calls {
					if c.tag == s.tag && c.start.After(wipeAt.Add(time.Second)) {
						row.OrphanPaid++
						add("paid calls for orphans", c.route+" "+id)
					}
				}
				continue
			}
			if rec.code == http.StatusNotFound {
				// Ended before the wipe; its record went with it.
				rec.status = evs0(evs)
			}
		} else if reposts[i] != "" {
			row.RepostMismatch++
			add("re-posts answered otherwise", s.key+": "+reposts[i])
		}

		outcomes := map[string]bool{}
		if isTerminal(rec.status) {
			outcomes[rec.status] = true
		}
		for _, e := range evs {
			outcomes[e.typ] = true
		}
		var hookIDs []string
		if hk != nil {
			hookIDs = slices.Sorted(maps.Keys(hk.ids))
			for k := range hk.statuses {
				outcomes[k] = true
			}
		}
		if len(outcomes) == 0 {
			row.Lost++
			add("lost", fmt.Sprintf("%s (record %q %d)", id, rec.status, rec.code))
			continue
		}
		final := rec.status
		if !isTerminal(final) {
			final = evs0(evs)
		}
		if final == "" {
			for k := range outcomes {
				final = k
			}
		}
		if final == "completed" {
			row.Completed++
		} else {
			row.Failed++
		}
		if len(outcomes) > 1 || len(hookIDs) > 1 || rec.code == http.StatusOK && !isTerminal(rec.status) {
			row.Contradictory++
			add("contradictory", fmt.Sprintf("%s (record %q, events %v, webhooks %v)", id, rec.status, evs, hookIDs))
		}
		if len(hookIDs) == 0 {
			row.NoWebhook++
			add("no terminal webhook", id)
		}
		if len(evs) == 0 && !sc.research {
			row.NoEvent++
			add("no terminal event", id)
		}
		if final != "completed" && modelCalls[s.tag] == 0 {
			row.NeverRan++
			add("never ran", id)
		}
	}
	r.recv.mu.Lock()
	row.BadSignatures = r.recv.badSig
	r.recv.mu.Unlock()

	problem := func(n int, what string) {
		if n > 0 {
			row.Problems = append(row.Problems, fmt.Sprintf("%d %s (e.g. %s)", n, what, strings.Join(ex[what], ", ")))
		}
	}
	problem(row.Unaccepted-row.Poisoned, "never accepted")
	problem(row.Poisoned, "poisoned keys")
	problem(row.DupJobs, "keys answered with several jobs")
	problem(row.RepostMismatch, "re-posts answered otherwise")
	problem(row.Lost, "lost")
	problem(row.Contradictory, "contradictory")
	problem(row.NoWebhook, "no terminal webhook")
	problem(row.NoEvent, "no terminal event")
	problem(row.NeverRan, "never ran")
	problem(row.Orphans-row.OrphansDLQ, "orphans not dead-lettered")
	problem(row.OrphanPaid, "paid calls for orphans")
	if row.Unexcused > 0 {
		row.Problems = append(row.Problems, fmt.Sprintf("%d repeated paid calls whose caller did not die (e.g. %s)", row.Unexcused, strings.Join(unexcused[:min(3, len(unexcused))], ", ")))
	}
	if row.BadSignatures > 0 {
		row.Problems = append(row.Problems, fmt.Sprintf("%d webhook deliveries with a bad signature", row.BadSignatures))
	}
	writeDetail(r, row, reps, facts)
	return row, nil
}

func evs0(evs []terminalEvent) string {
	if len(evs) == 0 {
		return ""
	}
	return evs[0].typ
}

func isTerminal(s string) bool { return s == "completed" || s == "failed" || s == "cancelled" }

// writeDetail leaves the scenario's timeline, repeats and dead letters beside its logs.
func writeDetail(r *rig, row Row, reps []repeat, facts *streamFacts) {
	f, err := os.Create(filepath.Join(r.dir, "detail.txt"))
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "scenario %s: %s\n\nproblems:\n", row.Scenario, row.Chaos)
	for _, p := range row.Problems {
		fmt.Fprintf(f, "  %s\n", p)
	}
	fmt.Fprintln(f, "\ntimeline:")
	for _, in := range r.timeline() {
		fmt.Fprintf(f, "  %s %-7s %-8s %s\n", in.at.Format("15:04:05.000"), in.kind, in.role, in.target)
	}
	fmt.Fprintln(f, "\nrepeated paid calls:")
	for _, rp := range reps {
		fmt.Fprintf(f, "  %s %-8s %s excused=%v %s\n", rp.call.start.Format("15:04:05.000"), rp.call.route, rp.call.tag, rp.excused, rp.why)
	}
	fmt.Fprintf(f, "\ndead letters (%d):\n", facts.dlqTotal)
	for _, d := range facts.dlq {
		fmt.Fprintf(f, "  %s %s %s\n", d.job, d.subject, d.reason)
	}
}

// PrintTable writes the rows as a Markdown table, then each failing scenario's
// problems.
func PrintTable(w io.Writer, rows []Row) {
	fmt.Fprintln(w, "| scenario | chaos | submitted | accepted | completed | failed | lost | contradictory | no webhook | no event | poisoned keys | dup jobs | re-post ≠ | never ran | repeated paid (sim) | unexcused | orphans | orphans DLQ'd | orphan paid | verdict |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|")
	for _, r := range rows {
		orph := func(n int) string {
			if r.Scenario != "redis-empty" {
				return "–"
			}
			return fmt.Sprint(n)
		}
		v := "PASS"
		if !r.OK() {
			v = "**FAIL**"
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %s | %s | %s | %s |\n",
			r.Scenario, r.Chaos, r.Submitted, r.Accepted, r.Completed, r.Failed, r.Lost, r.Contradictory, r.NoWebhook, r.NoEvent,
			r.Poisoned, r.DupJobs, r.RepostMismatch, r.NeverRan, r.Repeats, r.Unexcused, orph(r.Orphans), orph(r.OrphansDLQ), orph(r.OrphanPaid), v)
	}
	for _, r := range rows {
		if !r.OK() {
			fmt.Fprintf(w, "\n%s (%s):\n", r.Scenario, r.Elapsed)
			for _, p := range r.Problems {
				fmt.Fprintf(w, "  - %s\n", p)
			}
		}
	}
}
