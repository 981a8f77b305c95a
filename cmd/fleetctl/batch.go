package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// batch is the part of a batch object fleetctl reads.
type batch struct {
	ID            string            `json:"id"`
	Status        string            `json:"status"`
	Model         string            `json:"model"`
	InputFileID   string            `json:"input_file_id"`
	OutputFileID  string            `json:"output_file_id"`
	ErrorFileID   string            `json:"error_file_id"`
	CreatedAt     int64             `json:"created_at"`
	Metadata      map[string]string `json:"metadata"`
	RequestCounts struct {
		Total     int `json:"total"`
		Completed int `json:"completed"`
		Failed    int `json:"failed"`
	} `json:"request_counts"`
	Errors *errorList `json:"errors"`
}

// ended reports whether the batch has its final status.
func (b *batch) ended() bool {
	switch b.Status {
	case "completed", "failed", "expired", "cancelled":
		return true
	}
	return false
}

// metaFlag collects repeated --meta key=value flags.
type metaFlag map[string]string

func (m metaFlag) String() string { return fmt.Sprint(map[string]string(m)) }
func (m metaFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", v)
	}
	m[k] = val
	return nil
}

// batchSubmit is `batch submit FILE`: a .jsonl file of OpenAI batch requests is
// uploaded and run as is; any other file is read as one question per line (blank
// lines and lines starting with # are skipped) and sent as the simple form. It prints
// the batch id on stdout.
func (a *app) batchSubmit(ctx context.Context, args []string) error {
	fs := a.flags("batch submit")
	model := fs.String("model", "", "model of the questions of a text file (default: the fleet's only model)")
	window := fs.String("window", "24h", "completion window")
	watch := fs.Bool("watch", false, "watch the batch until it ends")
	interval := fs.Duration("interval", time.Second, "how often --watch polls")
	meta := metaFlag{}
	fs.Var(meta, "meta", "metadata key=value (repeatable)")
	pos, err := exactly(fs, args, 1, "one FILE")
	if err != nil {
		return err
	}
	jsonl, err := isJSONL(pos[0])
	if err != nil {
		return err
	}
	var b batch
	if jsonl {
		b, err = a.submitFile(ctx, pos[0], *window, meta)
	} else {
		b, err = a.submitQuestions(ctx, pos[0], *model, *window, meta)
	}
	if err != nil {
		return a.explain(err)
	}
	fmt.Fprintln(a.stdout, b.ID)
	fmt.Fprintf(a.stderr, "submitted %d requests as %s (%s)\n", b.RequestCounts.Total, b.ID, b.Status)
	if !*watch {
		return nil
	}
	return a.watchBatch(ctx, b.ID, *interval)
}

// isJSONL reports whether a file holds OpenAI batch requests: named .jsonl, or its
// first non-blank line is a JSON object with a custom_id.
func isJSONL(path string) (bool, error) {
	if strings.EqualFold(filepath.Ext(path), ".jsonl") {
		return true, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var probe struct {
			CustomID *string `json:"custom_id"`
		}
		return line[0] == '{' && json.Unmarshal(line, &probe) == nil && probe.CustomID != nil, nil
	}
	return false, sc.Err()
}

// submitFile uploads a JSONL input (streamed, as multipart) and creates its batch.
func (a *app) submitFile(ctx context.Context, path, window string, meta map[string]string) (batch, error) {
	f, err := os.Open(path)
	if err != nil {
		return batch{}, err
	}
	defer f.Close()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := mw.WriteField("purpose", "batch")
		if err == nil {
			var part io.Writer
			if part, err = mw.CreateFormFile("file", filepath.Base(path)); err == nil {
				_, err = io.Copy(part, f)
			}
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	resp, err := a.request(ctx, "POST", "/v1/files", pr, mw.FormDataContentType())
	if err != nil {
		return batch{}, err
	}
	var file struct {
		ID string `json:"id"`
	}
	err = json.NewDecoder(resp.Body).Decode(&file)
	resp.Body.Close()
	if err != nil {
		return batch{}, fmt.Errorf("upload: unreadable answer: %w", err)
	}
	var b batch
	err = a.call(ctx, "POST", "/v1/batches", map[string]any{"input_file_id": file.ID, "endpoint": "/v1/chat/completions",
		"completion_window": window, "metadata": nilIfEmpty(meta)}, &b)
	return b, err
}

// submitQuestions sends a text file's questions as the simple form.
func (a *app) submitQuestions(ctx context.Context, path, model, window string, meta map[string]string) (batch, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return batch{}, err
	}
	var qs []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			qs = append(qs, l)
		}
	}
	if len(qs) == 0 {
		return batch{}, fmt.Errorf("%s has no questions", path)
	}
	body := map[string]any{"queries": qs, "completion_window": window, "metadata": nilIfEmpty(meta)}
	if model != "" {
		body["model"] = model
	}
	var b batch
	err = a.call(ctx, "POST", "/v1/batches", body, &b)
	return b, err
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// batchWatch is `batch watch ID`.
func (a *app) batchWatch(ctx context.Context, args []string) error {
	fs := a.flags("batch watch")
	interval := fs.Duration("interval", time.Second, "how often to poll")
	pos, err := exactly(fs, args, 1, "a batch ID")
	if err != nil {
		return err
	}
	return a.watchBatch(ctx, pos[0], *interval)
}

// watchBatch polls a batch and shows its progress until it ends. A batch that
// ends failed or expired is an error (a non-zero exit).
func (a *app) watchBatch(ctx context.Context, id string, interval time.Duration) error {
	p := newProgress(a.stdout, a.tty, time.Now())
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		var b batch
		if err := a.call(ctx, "GET", "/v1/batches/"+id, nil, &b); err != nil {
			return err
		}
		p.update(b, time.Now())
		if b.ended() {
			p.finish(b, time.Now())
			return batchOutcome(b)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// batchOutcome is the error of a batch that did not run to its end.
func batchOutcome(b batch) error {
	switch b.Status {
	case "failed":
		msg := "batch " + b.ID + " failed"
		if b.Errors != nil && len(b.Errors.Data) > 0 {
			msg += ": " + b.Errors.Data[0].Message
		}
		return errors.New(msg)
	case "expired":
		return fmt.Errorf("batch %s expired before every request ran", b.ID)
	}
	return nil
}

// batchDownload is `batch download ID [-o FILE] [--errors]`.
func (a *app) batchDownload(ctx context.Context, args []string) error {
	fs := a.flags("batch download")
	out := fs.String("o", "", "write to this file instead of stdout")
	errs := fs.Bool("errors", false, "download the error file instead of the output file")
	pos, err := exactly(fs, args, 1, "a batch ID")
	if err != nil {
		return err
	}
	var b batch
	if err := a.call(ctx, "GET", "/v1/batches/"+pos[0], nil, &b); err != nil {
		return err
	}
	fileID, kind := b.OutputFileID, "output"
	if *errs {
		fileID, kind = b.ErrorFileID, "error"
	}
	switch {
	case !b.ended():
		return fmt.Errorf("batch %s is %s: its files are written when it ends (fleetctl batch watch %s)", b.ID, b.Status, b.ID)
	case fileID == "":
		return fmt.Errorf("batch %s has no %s file (%d completed, %d failed)", b.ID, kind, b.RequestCounts.Completed, b.RequestCounts.Failed)
	}
	return a.download(ctx, fileID, *out)
}

// download writes a file's content to path (or stdout).
func (a *app) download(ctx context.Context, fileID, path string) error {
	resp, err := a.request(ctx, "GET", "/v1/files/"+fileID+"/content", nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	w := a.stdout
	if path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	lines := &lineCounter{w: w}
	if _, err := io.Copy(lines, resp.Body); err != nil {
		return fmt.Errorf("downloading %s: %w", fileID, err)
	}
	if path != "" {
		fmt.Fprintf(a.stderr, "wrote %d lines to %s\n", lines.n, path)
	}
	return nil
}

// lineCounter counts the newlines written through it.
type lineCounter struct {
	w io.Writer
	n int
}

func (c *lineCounter) Write(p []byte) (int, error) {
	c.n += bytes.Count(p, []byte{'\n'})
	return c.w.Write(p)
}

// batchList is `batch list`.
func (a *app) batchList(ctx context.Context, args []string) error {
	fs := a.flags("batch list")
	limit := fs.Int("limit", 20, "how many batches (1..100)")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	var l struct {
		Data []batch `json:"data"`
	}
	if err := a.call(ctx, "GET", fmt.Sprintf("/v1/batches?limit=%d", *limit), nil, &l); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tDONE\tFAILED\tTOTAL\tCREATED")
	for _, b := range l.Data {
		c := b.RequestCounts
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\n", b.ID, b.Status, c.Completed, c.Failed, c.Total,
			time.Unix(b.CreatedAt, 0).Local().Format("2006-01-02 15:04:05"))
	}
	return tw.Flush()
}

// batchGet is `batch get ID`: the batch object, indented.
func (a *app) batchGet(ctx context.Context, args []string) error {
	return a.printObject(ctx, "GET", "/v1/batches/", args)
}

// batchCancel is `batch cancel ID`.
func (a *app) batchCancel(ctx context.Context, args []string) error {
	return a.printObject(ctx, "POST", "/v1/batches/", args, "/cancel")
}

// printObject prints the JSON object at prefix+ID+suffix, indented.
func (a *app) printObject(ctx context.Context, method, prefix string, args []string, suffix ...string) error {
	pos, err := exactly(a.flags(strings.TrimSpace(prefix)), args, 1, "an ID")
	if err != nil {
		return err
	}
	var v json.RawMessage
	if err := a.call(ctx, method, prefix+pos[0]+strings.Join(suffix, ""), nil, &v); err != nil {
		return err
	}
	return a.printIndented(v)
}

// printIndented prints a JSON value, indented.
func (a *app) printIndented(v json.RawMessage) error {
	var buf bytes.Buffer
	json.Indent(&buf, v, "", "  ")
	buf.WriteByte('\n')
	_, err := a.stdout.Write(buf.Bytes())
	return err
}
