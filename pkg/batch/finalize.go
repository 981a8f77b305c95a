package batch

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/research"
	"github.com/searchfleet/searchfleet/pkg/state"
	"github.com/searchfleet/searchfleet/pkg/webhook"
)

// finalizeChunk is how many lines finalization reads jobs for at once.
const finalizeChunk = 512

// outputLine is one line of an output or error file. A successful request has a
// response and a null error; any other has a null response and an error.
type outputLine struct {
	ID       string        `json:"id"`
	CustomID string        `json:"custom_id"`
	Response *lineResponse `json:"response"`
	Error    *lineFailure  `json:"error"`
}

// lineResponse is a request's answer: the HTTP status the synchronous endpoint would
// have given, the job id (GET /v1/jobs/{id} shows its trace), and the
// chat.completion.
type lineResponse struct {
	StatusCode int             `json:"status_code"`
	RequestID  string          `json:"request_id"`
	Body       json.RawMessage `json:"body"`
}

// lineFailure is why a request has no answer.
type lineFailure struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// finalize writes a resolved batch's output and error files — one line per request,
// in input order, every custom_id in exactly one of them — stores them, and gives the
// batch its final status: cancelled if it was cancelling, expired if a line ran out of
// window, else completed. Done twice, it writes the same files under the same ids.
func (s *Service) finalize(ctx context.Context, b *record) error {
	done, err := s.Store.BatchOutcomes(ctx, b.ID)
	if err != nil {
		return err
	}
	ids, err := s.Store.BatchCustomIDs(ctx, b.ID)
	if err != nil {
		return err
	}
	status := finalStatus(b, done)
	out, err := newOutputs()
	if err != nil {
		return err
	}
	defer out.close()
	for start := 0; start < b.Total; start += finalizeChunk {
		end := min(start+finalizeChunk, b.Total)
		jobs, err := s.jobsOf(ctx, b, start, end, done)
		if err != nil {
			return err
		}
		for i := start; i < end; i++ {
			if err := out.write(lineFor(b, i, ids[i], done[i], jobs[i-start], status)); err != nil {
				return err
			}
		}
	}
	outID, errID, err := s.storeOutputs(ctx, b, out)
	if err != nil {
		return err
	}
	moved, err := s.Store.FinishBatch(ctx, b.ID, status, state.BatchEnd{OutputFileID: outID, ErrorFileID: errID})
	if err != nil {
		return err
	}
	if b, err = s.Store.GetBatch(ctx, b.ID); err != nil {
		return ignoreGone(err)
	}
	if moved {
		s.batchEnded(ctx, b.Tenant, b.ID)
		s.Log.Info("batch ended", "batch", b.ID, "status", b.Status, "total", b.Total, "completed", b.Completed, "failed", b.Failed)
	}
	return s.notify(ctx, b)
}

// finalStatus is the status a resolved batch ends with.
func finalStatus(b *record, done map[int]string) string {
	if b.Status == state.BatchCancelling {
		return state.BatchCancelled
	}
	for i := range b.Total {
		if o := done[i]; o == "" || o == state.LineExpired {
			return state.BatchExpired
		}
	}
	return state.BatchCompleted
}

// jobsOf reads the jobs of lines [start, end) that completed or failed (the others'
// lines need no job).
func (s *Service) jobsOf(ctx context.Context, b *record, start, end int, done map[int]string) ([]*state.Job, error) {
	jobs := make([]*state.Job, end-start)
	err := s.parallel(ctx, end-start, func(k int) error {
		switch done[start+k] {
		case state.LineCompleted, state.LineFailed:
		default:
			return nil
		}
		j, err := s.Store.GetJob(ctx, jobID(b.ID, start+k))
		if errors.Is(err, state.ErrNotFound) {
			return nil
		}
		jobs[k] = j
		return err
	})
	return jobs, err
}

// lineFor is the output or error line of line i.
func lineFor(b *record, i int, customID, outcome string, job *state.Job, status string) outputLine {
	l := outputLine{ID: "batch_req_" + strings.TrimPrefix(b.ID, "batch_") + "_" + strconv.Itoa(i), CustomID: customID}
	fail := func(code, msg string) outputLine {
		l.Error = &lineFailure{Code: code, Message: msg}
		return l
	}
	switch outcome {
	case state.LineCompleted:
		if job == nil || len(job.Response) == 0 {
			return fail("result_unavailable", "The request completed, but its answer is no longer stored.")
		}
		if job.Kind == "research" {
			// The run as GET /v1/research/{id} shows it (its run ended the line's job).
			l.Response = &lineResponse{StatusCode: 200, RequestID: research.LineRunID(job.ID), Body: job.Response}
			return l
		}
		body, err := openaichat.AnswerJSON(job.Response)
		if err != nil {
			return fail("result_unavailable", "The request completed, but its stored answer is unreadable.")
		}
		l.Response = &lineResponse{StatusCode: 200, RequestID: job.ID, Body: body}
		return l
	case state.LineFailed:
		if job == nil || job.Error == nil {
			return fail("request_failed", "The request failed.")
		}
		return fail(cmp.Or(job.Error.Code, job.Error.Type), job.Error.Message)
	case state.LineCancelled:
		return fail("batch_cancelled", "The request was cancelled before it completed.")
	case state.LineExpired:
		return fail(jobs.BatchExpired().Code, jobs.BatchExpired().Message)
	}
	if status == state.BatchCancelled {
		return fail("batch_cancelled", "The batch was cancelled before this request started.")
	}
	return fail(jobs.BatchExpired().Code, jobs.BatchExpired().Message)
}

// outputs are the output and error files being written, in temporary files.
type outputs struct {
	files [2]*os.File
	bufs  [2]*bufio.Writer
	lines [2]int
}

func newOutputs() (*outputs, error) {
	o := &outputs{}
	for k := range o.files {
		f, err := os.CreateTemp("", "searchfleet-batch-out-*")
		if err != nil {
			o.close()
			return nil, fmt.Errorf("batch: output buffer: %w", err)
		}
		o.files[k], o.bufs[k] = f, bufio.NewWriterSize(f, 256<<10)
	}
	return o, nil
}

// write appends a line to the output file (k 0) or the error file (k 1).
func (o *outputs) write(l outputLine) error {
	k := 0
	if l.Error != nil {
		k = 1
	}
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	o.lines[k]++
	o.bufs[k].Write(b)
	return o.bufs[k].WriteByte('\n')
}

// reader flushes file k and returns it from its start.
func (o *outputs) reader(k int) (io.Reader, error) {
	if err := o.bufs[k].Flush(); err != nil {
		return nil, err
	}
	if _, err := o.files[k].Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return o.files[k], nil
}

func (o *outputs) close() {
	for _, f := range o.files {
		if f != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}
}

// storeOutputs stores the non-empty output and error files under ids derived from
// the batch id, and returns their ids ("" for an empty one).
func (s *Service) storeOutputs(ctx context.Context, b *record, o *outputs) (outID, errID string, err error) {
	ids := [2]string{}
	for k, kind := range []string{"output", "errors"} {
		if o.lines[k] == 0 {
			continue
		}
		r, err := o.reader(k)
		if err != nil {
			return "", "", err
		}
		f := &state.File{ID: "file-" + strings.TrimPrefix(b.ID, "batch_") + "-" + kind, Tenant: b.Tenant,
			Filename: b.ID + "_" + kind + ".jsonl", Purpose: PurposeOutput, Created: time.Now().UTC(),
			Expires: time.Now().Add(s.Store.RecordRetention())}
		if err := s.saveFile(ctx, f, r); err != nil {
			return "", "", err
		}
		ids[k] = f.ID
	}
	return ids[0], ids[1], nil
}

// notify enqueues the callback delivery of a batch that has ended, if its callback
// asks for that status ("batch.completed", "batch.cancelled", …), once: the delivery's
// id derives from the batch and status, and the record remembers it was queued.
func (s *Service) notify(ctx context.Context, b *record) error {
	if len(b.Callback) == 0 || !Ended(b.Status) || b.Webhook != "" {
		return nil
	}
	cb, err := webhook.DecodeCallback(b.Callback)
	if err != nil || cb.URL == "" {
		s.Log.Error("batch: stored callback unreadable", "batch", b.ID, "err", err)
		return nil
	}
	if len(cb.Events) > 0 && !cb.Wants(b.Status) {
		return s.Store.SetBatchWebhook(ctx, b.ID, "skipped", "")
	}
	d, err := webhook.NewDelivery(bus.WebhookDelivery{Tenant: b.Tenant, BatchID: b.ID, URL: cb.URL}, "batch", b.Status, endedAt(b), ViewOf(b))
	if err != nil {
		return err
	}
	if err := s.Bus.Publish(ctx, bus.SubjectWebhook, d); err != nil {
		return fmt.Errorf("batch %s: enqueueing its webhook: %w", b.ID, err)
	}
	// Only a state not yet recorded becomes "pending": the delivery may already have
	// settled (delivered, failed) while this step went on, and its outcome stays.
	return s.Store.SetBatchWebhook(ctx, b.ID, "pending", "")
}

// endedAt is when a batch reached its final status.
func endedAt(b *record) time.Time {
	for _, t := range []time.Time{b.CompletedAt, b.CancelledAt, b.ExpiredAt, b.FailedAt} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Now().UTC()
}
