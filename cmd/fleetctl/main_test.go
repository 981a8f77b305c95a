package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
)

// fleetctl runs the command against a fleet and returns stdout and stderr.
func fleetctl(t *testing.T, f *fleettest.Fleet, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(t.Context(), append([]string{"--url", f.URL}, args...), &out, &errb)
	return out.String(), errb.String(), err
}

func mustRun(t *testing.T, f *fleettest.Fleet, args ...string) string {
	t.Helper()
	out, errs, err := fleetctl(t, f, args...)
	if err != nil {
		t.Fatalf("fleetctl %s: %v\nstderr: %s", strings.Join(args, " "), err, errs)
	}
	return out
}

// A text file of questions goes through submit → watch → download: the watch's plain
// output ends with the final counts, and the output file has one line per question.
func TestBatchSubmitWatchDownload(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	dir := t.TempDir()
	questions := filepath.Join(dir, "questions.txt")
	os.WriteFile(questions, []byte("# research run\nFind the latest news about Go\n\nSearch the web: NATS JetStream\nWho won the cup today?\nHello sim:nosearch\n"), 0o644)

	id := strings.TrimSpace(mustRun(t, f, "batch", "submit", questions, "--model", "sim-model"))
	if !strings.HasPrefix(id, "batch_") {
		t.Fatalf("submit printed %q", id)
	}
	out := mustRun(t, f, "batch", "watch", id, "--interval", "50ms")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "completed 4/4 (4 completed, 0 failed) in ") {
		t.Errorf("watch ended with %q\n%s", last, out)
	}
	if strings.Contains(out, "\r") {
		t.Errorf("non-terminal output redraws: %q", out)
	}
	file := filepath.Join(dir, "answers.jsonl")
	mustRun(t, f, "batch", "download", id, "-o", file)
	data, _ := os.ReadFile(file)
	got := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(got) != 4 {
		t.Fatalf("%d output lines, want 4:\n%s", len(got), data)
	}
	for i, l := range got {
		var v struct {
			CustomID string `json:"custom_id"`
		}
		json.Unmarshal([]byte(l), &v)
		if want := "q-" + string(rune('1'+i)); v.CustomID != want {
			t.Errorf("line %d: custom_id %q, want %q", i, v.CustomID, want)
		}
	}
	if _, _, err := fleetctl(t, f, "batch", "download", id, "--errors"); err == nil || !strings.Contains(err.Error(), "no error file") {
		t.Errorf("--errors of a batch without errors: %v", err)
	}
	if list := mustRun(t, f, "batch", "list"); !strings.Contains(list, id) || !strings.Contains(list, "completed") {
		t.Errorf("list:\n%s", list)
	}
	if obj := mustRun(t, f, "batch", "get", id); !strings.Contains(obj, `"status": "completed"`) {
		t.Errorf("get:\n%s", obj)
	}
}

// A JSONL file is uploaded as is; an invalid one is refused with every bad line.
func TestBatchSubmitJSONL(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "in.jsonl")
	os.WriteFile(good, []byte(`{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "sim-model", "messages": [{"role": "user", "content": "Search the web: weather?"}]}}`+"\n"), 0o644)
	id := strings.TrimSpace(mustRun(t, f, "batch", "submit", good, "--watch", "--interval", "50ms", "--meta", "run=1"))
	if !strings.Contains(id, "completed 1/1") {
		t.Errorf("submit --watch printed %q", id)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("{}\nnot json\n"), 0o644)
	_, errs, err := fleetctl(t, f, "batch", "submit", bad)
	if err == nil || !strings.Contains(err.Error(), "HTTP 400") || !strings.Contains(errs, "line 1:") || !strings.Contains(errs, "line 2:") {
		t.Errorf("bad input: %v\n%s", err, errs)
	}
}

// job submit --wait prints an answer citing its sources; job get prints it again.
func TestJobSubmitWait(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	out, errs, err := fleetctl(t, f, "job", "submit", "Search the web: what is the weather in Paris today?", "--wait")
	if err != nil {
		t.Fatalf("%v\n%s", err, errs)
	}
	if !strings.Contains(out, "[1]") || !strings.Contains(out, "Sources:") {
		t.Errorf("answer:\n%s", out)
	}
	for _, want := range []string{"model call (hop 0)", "searching google", "completed"} {
		if !strings.Contains(errs, want) {
			t.Errorf("events lack %q:\n%s", want, errs)
		}
	}
	id := strings.TrimPrefix(strings.SplitN(errs, "\n", 2)[0], "job ")
	if again := mustRun(t, f, "job", "get", id); again != out {
		t.Errorf("job get printed\n%s\nwant\n%s", again, out)
	}
	if watched := mustRun(t, f, "job", "watch", id); watched != out {
		t.Errorf("job watch printed\n%s", watched)
	}
	// A replay prints the same answer from the recorded searches, searching nothing.
	searches := f.Sim.Stats().Requests["gemini"]
	if searches == 0 {
		t.Fatal("the job searched nothing")
	}
	replayed, errs, err := fleetctl(t, f, "job", "replay", id, "--wait")
	if err != nil || replayed != out || !strings.Contains(errs, "replays "+id) {
		t.Errorf("job replay: %v\n%s\n%s", err, replayed, errs)
	}
	if got := f.Sim.Stats().Requests["gemini"]; got != searches {
		t.Errorf("the replay searched %d times", got-searches)
	}
}

// search prints one engine's hits.
func TestSearch(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	out := mustRun(t, f, "search", "go generics", "--engine", "brave", "--count", "3")
	if !strings.HasPrefix(out, "brave: 3 results") || !strings.Contains(out, "[3] ") {
		t.Errorf("search:\n%s", out)
	}
	if _, _, err := fleetctl(t, f, "search", "x", "--engine", "nosuch"); err == nil || !strings.Contains(err.Error(), "HTTP 400") {
		t.Errorf("unknown engine: %v", err)
	}
}

// Usage errors are reported without reaching a fleet.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{}, {"nope"}, {"batch"}, {"batch", "fly"}, {"batch", "watch"}, {"job", "get", "a", "b"}} {
		if err := run(t.Context(), args, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// -h and --help print usage and succeed, for fleetctl and for each command.
func TestHelpSucceeds(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"job", "submit", "--help"}, {"batch", "watch", "-h"}, {"search", "--help"}} {
		var out, errOut bytes.Buffer
		if err := run(t.Context(), args, &out, &errOut); err != nil {
			t.Errorf("%v: %v", args, err)
		}
		if !strings.Contains(out.String()+errOut.String(), "Usage") {
			t.Errorf("%v printed no usage: %q %q", args, out.String(), errOut.String())
		}
	}
}

// Progress on a terminal redraws one line with a bar, rate and ETA; elsewhere it
// prints a line at status changes and at most every plainEvery while counts move.
func TestProgress(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	at := func(status string, completed, failed int) batch {
		var b batch
		b.ID, b.Status = "batch_x", status
		b.RequestCounts.Total, b.RequestCounts.Completed, b.RequestCounts.Failed = 100, completed, failed
		return b
	}
	var tty bytes.Buffer
	p := newProgress(&tty, true, t0)
	p.update(at("in_progress", 0, 0), t0)
	p.update(at("in_progress", 40, 10), t0.Add(10*time.Second))
	p.finish(at("completed", 90, 10), t0.Add(20*time.Second))
	want := "\r\x1b[K[------------------------------] in_progress 0/100 (0 completed, 0 failed), ETA -" +
		"\r\x1b[K[###############---------------] in_progress 50/100 (40 completed, 10 failed), 5.0/s, ETA 10s" +
		"\r\x1b[K[##############################] completed 100/100 (90 completed, 10 failed) in 20s, 5.0/s\n"
	if tty.String() != want {
		t.Errorf("terminal output\n%q\nwant\n%q", tty.String(), want)
	}

	var plain bytes.Buffer
	p = newProgress(&plain, false, t0)
	p.update(at("validating", 0, 0), t0)
	p.update(at("in_progress", 1, 0), t0.Add(time.Second))
	p.update(at("in_progress", 2, 0), t0.Add(2*time.Second)) // too soon: not printed
	p.update(at("in_progress", 3, 0), t0.Add(7*time.Second))
	p.finish(at("cancelled", 3, 0), t0.Add(8*time.Second))
	got := strings.Split(strings.TrimSpace(plain.String()), "\n")
	if len(got) != 4 || !strings.HasPrefix(got[2], "in_progress 3/100") || got[3] != "cancelled 3/100 (3 completed, 0 failed) in 8s, 0.4/s" {
		t.Errorf("plain output:\n%s", plain.String())
	}
}

// research --watch shows the plan and each sub-question live, then prints the report
// with its source list.
func TestResearchWatch(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	out, errs, err := fleetctl(t, f, "research", "How do tides work?", "--effort", "low", "--watch")
	if err != nil {
		t.Fatalf("research --watch: %v\n%s", err, errs)
	}
	for _, want := range []string{"plan: 3 sub-questions", "→ What is the background of", "search ", "✓ round 0: completed", "writing the report", "completed: 3 sub-questions"} {
		if !strings.Contains(errs, want) {
			t.Errorf("progress lacks %q:\n%s", want, errs)
		}
	}
	if !strings.Contains(out, "## Sources") || !strings.Contains(out, "[1]") {
		t.Errorf("report:\n%s", out)
	}
	id := strings.TrimPrefix(strings.SplitN(errs, "\n", 2)[0], "research run ")
	if again := mustRun(t, f, "research", "watch", id); again != out {
		t.Errorf("research watch printed\n%s\nwant\n%s", again, out)
	}
}
