package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// job is the part of a job fleetctl reads.
type job struct {
	ID       string          `json:"id"`
	Status   string          `json:"status"`
	Model    string          `json:"model"`
	Response json.RawMessage `json:"response"`
	Error    *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

// completion is the part of a chat.completion fleetctl prints.
type completion struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Searchfleet struct {
		Sources []struct {
			Title string `json:"title"`
			URL   string `json:"url"`
		} `json:"sources"`
	} `json:"searchfleet"`
}

// jobSubmit is `job submit QUESTION [--model M] [--wait]`: without --wait it prints the
// job id; with it, it follows the job and prints the answer.
func (a *app) jobSubmit(ctx context.Context, args []string) error {
	fs := a.flags("job submit")
	model := fs.String("model", "", "model (default: the fleet's first)")
	wait := fs.Bool("wait", false, "follow the job and print its answer")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return errors.New("expected a QUESTION")
	}
	if *model == "" {
		if *model, err = a.firstModel(ctx); err != nil {
			return err
		}
	}
	var j job
	body := map[string]any{"model": *model, "messages": []any{map[string]string{"role": "user", "content": strings.Join(pos, " ")}}}
	if err := a.call(ctx, "POST", "/v1/jobs", body, &j); err != nil {
		return err
	}
	return a.started(*wait, j.ID, func() error { return a.followAndPrint(ctx, j.ID) }, "job", j.ID)
}

// started prints a new job's or run's id (stdout), or with follow set notes it (note,
// on stderr) and follows it.
func (a *app) started(follow bool, id string, then func() error, note ...any) error {
	if !follow {
		fmt.Fprintln(a.stdout, id)
		return nil
	}
	fmt.Fprintln(a.stderr, note...)
	return then()
}

// firstModel is the first model the fleet serves.
func (a *app) firstModel(ctx context.Context) (string, error) {
	var l struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := a.call(ctx, "GET", "/v1/models", nil, &l); err != nil {
		return "", err
	}
	if len(l.Data) == 0 {
		return "", errors.New("the fleet serves no model")
	}
	return l.Data[0].ID, nil
}

// jobWatch is `job watch ID`: the job's events as they happen, then its answer.
func (a *app) jobWatch(ctx context.Context, args []string) error {
	pos, err := exactly(a.flags("job watch"), args, 1, "a job ID")
	if err != nil {
		return err
	}
	return a.followAndPrint(ctx, pos[0])
}

// followAndPrint follows a job's events to its end, then prints its answer.
func (a *app) followAndPrint(ctx context.Context, id string) error {
	if err := a.follow(ctx, id); err != nil {
		return err
	}
	var j job
	if err := a.call(ctx, "GET", "/v1/jobs/"+id, nil, &j); err != nil {
		return err
	}
	return a.printAnswer(j)
}

// event is a job lifecycle event as GET /v1/jobs/{id}/events sends it.
type event struct {
	Type    string `json:"type"`
	Hop     int    `json:"hop"`
	Engine  string `json:"engine"`
	Query   string `json:"query"`
	Sources int    `json:"sources"`
	Error   string `json:"error"`
}

// follow reads a job's server-sent events, printing each on stderr, until the
// terminal one.
func (a *app) follow(ctx context.Context, id string) error {
	resp, err := a.request(ctx, "GET", "/v1/jobs/"+id+"/events", nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _, err = readEvents(resp.Body, func(data []byte) bool {
		var ev event
		if json.Unmarshal(data, &ev) != nil {
			return false
		}
		fmt.Fprintln(a.stderr, "  "+describe(ev))
		return ev.Type == "completed" || ev.Type == "failed" || ev.Type == "cancelled"
	})
	if err != nil {
		return fmt.Errorf("following job %s: %w", id, err)
	}
	return nil
}

// describe words an event for people.
func describe(ev event) string {
	switch ev.Type {
	case "model_call":
		return fmt.Sprintf("model call (hop %d)", ev.Hop)
	case "search_requested":
		return fmt.Sprintf("searching %s: %s", ev.Engine, ev.Query)
	case "search_done":
		if ev.Error != "" {
			return fmt.Sprintf("search on %s failed: %s", ev.Engine, ev.Error)
		}
		return fmt.Sprintf("%s found %d sources", ev.Engine, ev.Sources)
	case "failed":
		return "failed: " + ev.Error
	}
	return ev.Type
}

// printAnswer prints a finished job's answer and its sources; a job that did not
// complete is an error.
func (a *app) printAnswer(j job) error {
	switch j.Status {
	case "completed":
	case "failed":
		msg := "the job failed"
		if j.Error != nil {
			msg += ": " + j.Error.Message
		}
		return errors.New(msg)
	default:
		return fmt.Errorf("job %s is %s", j.ID, j.Status)
	}
	var c completion
	if err := json.Unmarshal(j.Response, &c); err != nil || len(c.Choices) == 0 {
		_, err := fmt.Fprintf(a.stdout, "%s\n", j.Response)
		return err
	}
	fmt.Fprintln(a.stdout, strings.TrimSpace(c.Choices[0].Message.Content))
	if len(c.Searchfleet.Sources) > 0 {
		fmt.Fprintln(a.stdout, "\nSources:")
		for i, s := range c.Searchfleet.Sources {
			fmt.Fprintf(a.stdout, "  [%d] %s — %s\n", i+1, s.Title, s.URL)
		}
	}
	return nil
}

// jobGet is `job get ID [--json]`.
func (a *app) jobGet(ctx context.Context, args []string) error {
	fs := a.flags("job get")
	raw := fs.Bool("json", false, "print the job object")
	pos, err := exactly(fs, args, 1, "a job ID")
	if err != nil {
		return err
	}
	if *raw {
		return a.printObject(ctx, "GET", "/v1/jobs/", pos)
	}
	var j job
	if err := a.call(ctx, "GET", "/v1/jobs/"+pos[0], nil, &j); err != nil {
		return err
	}
	fmt.Fprintf(a.stderr, "job %s: %s\n", j.ID, j.Status)
	switch j.Status {
	case "queued", "running":
		return nil
	}
	return a.printAnswer(j)
}

// search is `search QUERY [--engine E] [--count N] [--json]`: one normalized search.
func (a *app) search(ctx context.Context, args []string) error {
	fs := a.flags("search")
	engine := fs.String("engine", "", "engine id (default: the fleet's default)")
	count := fs.Int("count", 0, "number of results (1..50)")
	raw := fs.Bool("json", false, "print the result object")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return errors.New("expected a QUERY")
	}
	body := map[string]any{"query": strings.Join(pos, " ")}
	if *engine != "" {
		body["engine"] = *engine
	}
	if *count > 0 {
		body["count"] = *count
	}
	var out json.RawMessage
	if err := a.call(ctx, "POST", "/v1/search", body, &out); err != nil {
		return err
	}
	if *raw {
		return a.printIndented(out)
	}
	return a.printResult(out)
}

// printResult prints a search result: the engine's summary, or its text for a model,
// and the hits.
func (a *app) printResult(raw json.RawMessage) error {
	var r struct {
		Result struct {
			Engine  string `json:"engine"`
			Summary string `json:"summary"`
			Hits    []struct {
				Title   string `json:"title"`
				URL     string `json:"url"`
				Snippet string `json:"snippet"`
			} `json:"hits"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("unreadable search result: %w", err)
	}
	fmt.Fprintf(a.stdout, "%s: %d results\n", r.Result.Engine, len(r.Result.Hits))
	if r.Result.Summary != "" {
		fmt.Fprintf(a.stdout, "\n%s\n", strings.TrimSpace(r.Result.Summary))
	}
	for i, h := range r.Result.Hits {
		fmt.Fprintf(a.stdout, "\n[%d] %s\n    %s\n", i+1, h.Title, h.URL)
		if h.Snippet != "" {
			fmt.Fprintf(a.stdout, "    %s\n", h.Snippet)
		}
	}
	return nil
}

// jobReplay is `job replay ID [--wait]`: a new job with the ended job's request and
// model, its searches answered from the ones that job recorded (POST
// /v1/jobs/{id}/replay). Without --wait it prints the new job's id; with it, it
// follows the replay and prints its answer.
func (a *app) jobReplay(ctx context.Context, args []string) error {
	fs := a.flags("job replay")
	wait := fs.Bool("wait", false, "follow the replay and print its answer")
	pos, err := exactly(fs, args, 1, "a job ID")
	if err != nil {
		return err
	}
	var j job
	if err := a.call(ctx, "POST", "/v1/jobs/"+pos[0]+"/replay", nil, &j); err != nil {
		return err
	}
	return a.started(*wait, j.ID, func() error { return a.followAndPrint(ctx, j.ID) }, "job", j.ID, "replays", pos[0])
}
