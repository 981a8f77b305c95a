package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// run is the part of a research run fleetctl reads.
type researchRun struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Output *struct {
		Report    string `json:"report"`
		Citations struct {
			Cited   int `json:"cited"`
			Valid   int `json:"valid"`
			Removed int `json:"removed"`
		} `json:"citations"`
	} `json:"output"`
	Incomplete *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	Usage struct {
		CostUSD  float64 `json:"cost_usd"`
		Searches int     `json:"searches"`
		Children int     `json:"children"`
	} `json:"usage"`
}

// research is `research QUESTION [--model M] [--effort E] [--watch]` (start a run:
// print its id, or with --watch its plan and progress live, then its report), and
// `research watch ID` / `research get ID`.
func (a *app) research(ctx context.Context, args []string) error {
	if len(args) > 0 && (args[0] == "watch" || args[0] == "get") {
		pos, err := exactly(a.flags("research "+args[0]), args[1:], 1, "a run ID")
		if err != nil {
			return err
		}
		if args[0] == "watch" {
			return a.researchWatch(ctx, pos[0])
		}
		return a.researchPrint(ctx, pos[0])
	}
	fs := a.flags("research")
	model := fs.String("model", "", "the research model, research/<brain> (default: research/ and the fleet's first model)")
	effort := fs.String("effort", "medium", "low, medium, high or max")
	watch := fs.Bool("watch", false, "show the plan and progress live, then print the report")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return errors.New("expected a QUESTION")
	}
	if *model == "" {
		m, err := a.firstModel(ctx)
		if err != nil {
			return err
		}
		*model = "research/" + m
	}
	var r researchRun
	if err := a.call(ctx, "POST", "/v1/research", map[string]any{"input": strings.Join(pos, " "), "model": *model, "effort": *effort}, &r); err != nil {
		return err
	}
	return a.started(*watch, r.ID, func() error { return a.researchWatch(ctx, r.ID) }, "research run", r.ID)
}

// researchWatch follows a run's events (resuming from the last id seen when the
// stream ends early) and prints its report once it has ended.
func (a *app) researchWatch(ctx context.Context, id string) error {
	last := ""
	for range 100 {
		resp, err := a.request(ctx, "GET", "/v1/research/"+id+"/events?after="+last, nil, "")
		if err != nil {
			return err
		}
		at, done, _ := readEvents(resp.Body, a.researchEvent) // a broken stream resumes below
		resp.Body.Close()
		if at != "" {
			last = at
		}
		if done {
			break
		}
		var r researchRun
		if err := a.call(ctx, "GET", "/v1/research/"+id, nil, &r); err != nil {
			return err
		}
		if r.Status == "requires_action" {
			fmt.Fprintf(a.stderr, "the plan waits for approval: POST /v1/research/%s/plan\n", id)
			return nil
		}
		if r.Status == "completed" || r.Status == "failed" || r.Status == "cancelled" {
			break
		}
	}
	return a.researchPrint(ctx, id)
}

// researchEvent prints one event's line; it reports whether the run is done.
func (a *app) researchEvent(data []byte) bool {
	var e struct {
		Type     string `json:"type"`
		Question string `json:"question"`
		Query    string `json:"query"`
		URL      string `json:"url"`
		Status   string `json:"status"`
		Reason   string `json:"reason"`
		Sources  int    `json:"sources"`
		Round    int    `json:"round"`
		Plan     struct {
			Questions []struct {
				Question string `json:"question"`
			} `json:"questions"`
		} `json:"plan"`
		Gaps []struct {
			Question string `json:"question"`
		} `json:"gaps"`
	}
	if json.Unmarshal(data, &e) != nil {
		return false
	}
	switch e.Type {
	case "plan":
		fmt.Fprintf(a.stderr, "plan: %d sub-questions\n", len(e.Plan.Questions))
		for i, q := range e.Plan.Questions {
			fmt.Fprintf(a.stderr, "  %d. %s\n", i+1, q.Question)
		}
	case "subquestion.started":
		fmt.Fprintf(a.stderr, "  → %s\n", e.Question)
	case "search":
		fmt.Fprintf(a.stderr, "    search %q\n", e.Query)
	case "fetch":
		fmt.Fprintf(a.stderr, "    read %s\n", e.URL)
	case "subquestion.finished":
		fmt.Fprintf(a.stderr, "  ✓ round %d: %s, %d sources\n", e.Round, e.Status, e.Sources)
	case "reflection":
		fmt.Fprintf(a.stderr, "reflection: %d gaps\n", len(e.Gaps))
	case "draft":
		fmt.Fprintln(a.stderr, "writing the report")
	case "verification":
		fmt.Fprintln(a.stderr, "checking its citations")
	case "stopped":
		fmt.Fprintf(a.stderr, "stopped: %s\n", e.Reason)
	case "done":
		return true
	}
	return false
}

// researchPrint prints a run's report (stdout) and its summary (stderr).
func (a *app) researchPrint(ctx context.Context, id string) error {
	var r researchRun
	if err := a.call(ctx, "GET", "/v1/research/"+id, nil, &r); err != nil {
		return err
	}
	switch {
	case r.Status == "failed" && r.Error != nil:
		return fmt.Errorf("research run %s failed: %s", id, r.Error.Message)
	case r.Output == nil:
		fmt.Fprintf(a.stdout, "research run %s is %s\n", id, r.Status)
		return nil
	}
	fmt.Fprintln(a.stdout, r.Output.Report)
	c := r.Output.Citations
	note := ""
	if r.Incomplete != nil {
		note = " (stopped: " + r.Incomplete.Reason + ")"
	}
	fmt.Fprintf(a.stderr, "%s%s: %d sub-questions, %d searches, $%.4f; citations %d cited, %d valid, %d removed\n",
		r.Status, note, r.Usage.Children, r.Usage.Searches, r.Usage.CostUSD, c.Cited, c.Valid, c.Removed)
	return nil
}
