package batch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/research"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Driving settings.
const (
	// expandChunk is how many lines one expansion round creates and publishes before
	// it moves the cursor: a crash repeats at most one round, whose jobs exist
	// already (their ids are deterministic) and whose publishes the stream drops as
	// duplicates.
	expandChunk = 256
	// workers is how many Redis round trips expansion, sweeps and finalization make
	// at once.
	workers = 16
	// leaseTTL is how long a dead driver's lease blocks the next; a live one renews it.
	leaseTTL = 15 * time.Second
	// staleAfter is how long a batch may go without progress before a look at it
	// (GET, the sweeper) asks for a repair: recounting lines whose job ended without
	// being counted (a worker that died between ending a job and counting it).
	staleAfter = 30 * time.Second
)

// HandleExpand drives one batch forward: the batch-expander consumer's handler. The
// same message kind serves every step, distinguished only by the batch's state:
// expansion (create and publish the jobs from the cursor on), the cancel sweep, the
// expiry sweep, a repair, and finalization. One process drives a batch at a time (a
// lease); a message that finds it held is retried when the lease would lapse.
func (s *Service) HandleExpand(ctx context.Context, d *bus.Delivery[bus.BatchExpand]) error {
	id := d.Msg.BatchID
	b, err := s.Store.GetBatch(ctx, id)
	if errors.Is(err, state.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if Ended(b.Status) {
		return s.notify(ctx, b)
	}
	release, left, err := s.Store.HoldBatch(ctx, id, state.NewID("drv_"), leaseTTL)
	if err != nil {
		return err
	}
	if release == nil {
		return bus.LeaseHeld(left, fmt.Errorf("batch %s is being driven by another process", id))
	}
	defer release(true)
	return s.drive(ctx, id)
}

// drive runs every step the batch is ready for, under its lease.
func (s *Service) drive(ctx context.Context, id string) error {
	b, err := s.Store.GetBatch(ctx, id)
	if err != nil || Ended(b.Status) {
		return ignoreGone(err)
	}
	if !b.ExpandDone {
		if err := s.expand(ctx, b); err != nil {
			return err
		}
		if b, err = s.Store.GetBatch(ctx, id); err != nil || Ended(b.Status) {
			return ignoreGone(err)
		}
	}
	switch {
	case b.Status == state.BatchCancelling:
		err = s.sweep(ctx, b, state.LineCancelled)
	case !time.Now().Before(b.Expires):
		err = s.sweep(ctx, b, state.LineExpired)
	case time.Since(b.ProgressAt) > staleAfter:
		err = s.reconcile(ctx, b)
	}
	if err != nil {
		return err
	}
	if b, err = s.Store.GetBatch(ctx, id); err != nil {
		return ignoreGone(err)
	}
	if !Ended(b.Status) && b.Resolved() {
		return s.finalize(ctx, b)
	}
	return nil
}

func ignoreGone(err error) error {
	if errors.Is(err, state.ErrNotFound) {
		return nil
	}
	return err
}

// errStop ends an expansion early: the batch is cancelling or its window has ended.
var errStop = errors.New("batch: expansion stopped")

// pendingLine is an input line waiting for its job.
type pendingLine struct {
	i   int
	raw []byte
}

// expand creates and publishes the jobs of the lines from the cursor on and marks
// expansion done — cut short if the batch is cancelling or its window has ended: the
// lines left never run.
func (s *Service) expand(ctx context.Context, b *record) error {
	cursor := b.Expanded
	if b.Status == state.BatchValidating || b.Status == state.BatchInProgress {
		rc, err := s.OpenFile(ctx, b.InputFileID)
		if errors.Is(err, state.ErrNotFound) {
			s.failBatch(ctx, b, newLineError(0, "input_file_missing", "input_file_id", "the input file %s was deleted before the batch could run", b.InputFileID))
			return nil
		}
		if err != nil {
			return err
		}
		defer rc.Close()
		cursor, err = s.expandLines(ctx, b, rc)
		if errors.Is(err, errWindow) {
			_, err = s.Store.AdvanceBatch(ctx, b.ID, cursor, false)
			return err
		}
		if err != nil && !errors.Is(err, errStop) {
			return err
		}
	}
	_, err := s.Store.AdvanceBatch(ctx, b.ID, cursor, true)
	return err
}

// researchWindow is how many of a research batch's runs are under way at once: each
// line that ends lets the next start (JobFinished kicks the expansion on), so one
// large batch does not hold every research step queued ahead of other runs.
const researchWindow = 8

// errWindow pauses a research batch's expansion: researchWindow runs are under way.
var errWindow = errors.New("batch: research runs under way fill the window")

// expandLines expands the input's lines from the batch's cursor on, a chunk at a
// time, moving the cursor after each chunk, and returns the cursor where it stopped.
func (s *Service) expandLines(ctx context.Context, b *record, input io.Reader) (int, error) {
	cursor := b.Expanded
	var chunk []pendingLine
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		if err := s.expandChunk(ctx, b, chunk); err != nil {
			return err
		}
		cursor = chunk[len(chunk)-1].i + 1
		chunk = chunk[:0]
		_, err := s.Store.AdvanceBatch(ctx, b.ID, cursor, false)
		return err
	}
	i := 0
	err := eachLine(input, func(_ int, line []byte) error {
		if len(bytes.TrimSpace(line)) == 0 {
			return nil
		}
		idx := i
		i++
		if idx < cursor {
			return nil // expanded by an earlier delivery
		}
		if b.Endpoint == researchEndpoint && idx >= b.Ended+researchWindow {
			if err := flush(); err != nil {
				return err
			}
			return errWindow
		}
		if chunk = append(chunk, pendingLine{i: idx, raw: bytes.Clone(line)}); len(chunk) < expandChunk {
			return nil
		}
		return flush()
	})
	if err == nil {
		err = flush()
	}
	return cursor, err
}

// expandChunk creates the jobs of a chunk of lines and publishes them, unless the
// batch should stop expanding.
func (s *Service) expandChunk(ctx context.Context, b *record, chunk []pendingLine) error {
	st, err := s.Store.BatchStatus(ctx, b.ID)
	if err != nil {
		return err
	}
	if st != state.BatchValidating && st != state.BatchInProgress || !time.Now().Before(b.Expires) {
		return errStop
	}
	pending := make([]bus.Pending, len(chunk))
	err = s.parallel(ctx, len(chunk), func(k int) error {
		var err error
		pending[k], err = s.createJob(ctx, b, chunk[k].i, chunk[k].raw)
		return err
	})
	if err != nil {
		return err
	}
	return bus.Wait(ctx, pending...)
}

// createJob records the job of line i and publishes it on its batch's lane
// (fleet.jobs.v1.chat.batch.<tenant>.<batch>: chat workers take lines round robin
// across tenants and across a tenant's batches, bus.ConsumeFair); a job
// an earlier delivery recorded is only published again (jobs.Submit).
func (s *Service) createJob(ctx context.Context, b *record, i int, raw []byte) (bus.Pending, error) {
	var l struct {
		Body json.RawMessage `json:"body"`
	}
	changed := bus.Permanent(fmt.Errorf("batch %s line %d: the input changed since it was validated", b.ID, i+1))
	if json.Unmarshal(raw, &l) != nil {
		return bus.Pending{}, changed
	}
	if b.Endpoint == researchEndpoint {
		return bus.Pending{}, s.startRun(ctx, b, i, l.Body, changed)
	}
	req, err := openaichat.Client.DecodeRequest(l.Body)
	if err != nil {
		return bus.Pending{}, changed
	}
	stored, err := wire.EncodeStored(wire.OpenAIChat, req)
	if err != nil {
		return bus.Pending{}, bus.Permanent(err)
	}
	job := &state.Job{ID: jobID(b.ID, i), Tenant: b.Tenant, Kind: "chat", Model: req.Model, Request: stored,
		Created: time.Now().UTC(), Deadline: b.Expires, Batch: b.ID, Band: bus.BandBatch}
	if ok, err := s.chargeLine(ctx, job); !ok {
		return bus.Pending{}, err // refused by the tenant's storage quota: the line failed (quota.go)
	}
	return jobs.Submit(ctx, s.Bus, s.Store, job, bus.SubjectJob(bus.BandBatch, job.Tenant, b.ID), bus.ChatJob{JobID: job.ID, Tenant: job.Tenant})
}

// startRun records the job of research line i — the line's record, which its run
// ends as the run ends — and starts its run (research.Service.StartLine): the run's
// children run on the batch's lane and count against its cap. A line expanded again
// finds both recorded and starts nothing new.
func (s *Service) startRun(ctx context.Context, b *record, i int, body json.RawMessage, changed error) error {
	var rb research.Body
	if s.Research == nil || json.Unmarshal(body, &rb) != nil {
		return changed
	}
	req, err := rb.Request("batch")
	if err != nil {
		return changed
	}
	job := &state.Job{ID: jobID(b.ID, i), Tenant: b.Tenant, Kind: "research", Model: req.Model, Request: body,
		Created: time.Now().UTC(), Deadline: b.Expires, Batch: b.ID, Band: bus.BandBatch}
	if ok, err := s.chargeLine(ctx, job); !ok {
		return err // refused by the tenant's storage quota: the line failed (quota.go)
	}
	switch err := s.Store.CreateJob(ctx, job); {
	case err == nil:
		s.Bus.EmitEvent(bus.Event{JobID: job.ID, Type: bus.EventQueued, At: job.Created})
	case errors.Is(err, state.ErrExists):
		if st, err := s.Store.JobStatus(ctx, job.ID); err != nil || st.Terminal() {
			return err
		}
	default:
		return err
	}
	_, err = s.Research.StartLine(ctx, b.Tenant, b.ID, job.ID, req, b.Expires)
	if errors.Is(err, research.ErrInvalid) || errors.Is(err, research.ErrNoModel) || errors.Is(err, research.ErrNoAgent) {
		return changed
	}
	return err
}

// parallel runs fn(0..n-1) with at most `workers` at once and joins their errors.
func (s *Service) parallel(ctx context.Context, n int, fn func(k int) error) error {
	errs := make([]error, n)
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for k := range n {
		if ctx.Err() != nil {
			errs[k] = ctx.Err()
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[k] = fn(k)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// eachUnfinished runs fn, `workers` at once, for every line with a job but no
// outcome yet.
func (s *Service) eachUnfinished(ctx context.Context, b *record, fn func(i int) error) error {
	done, err := s.Store.BatchOutcomes(ctx, b.ID)
	if err != nil {
		return err
	}
	var todo []int
	for i := range b.Expanded {
		if _, ok := done[i]; !ok {
			todo = append(todo, i)
		}
	}
	return s.parallel(ctx, len(todo), func(k int) error { return fn(todo[k]) })
}

// sweep ends every unfinished job of a batch — cancelled, or failed as expired — and
// counts it (endLine).
func (s *Service) sweep(ctx context.Context, b *record, outcome string) error {
	return s.eachUnfinished(ctx, b, func(i int) error { return s.endLine(ctx, b, i, outcome) })
}

// endLine ends line i's job with outcome (cancelled or expired) and counts it. A job
// that ended meanwhile (jobs.End lets the first ending stand) is counted as it ended.
func (s *Service) endLine(ctx context.Context, b *record, i int, outcome string) error {
	if b.Endpoint == researchEndpoint && s.Research != nil {
		// The line's run ends cancelled, and its children with it.
		if _, err := s.Research.Cancel(ctx, b.Tenant, research.LineRunID(jobID(b.ID, i))); err != nil && !errors.Is(err, state.ErrNotFound) {
			return err
		}
	}
	end := jobs.Ending{Status: state.Cancelled}
	if outcome != state.LineCancelled {
		end = jobs.Ending{Status: state.Failed, Error: jobs.BatchExpired()}
	}
	if err := s.Ender.End(ctx, jobID(b.ID, i), end); err != nil && !errors.Is(err, jobs.ErrUnknownJob) {
		return err
	}
	return s.recount(ctx, b, i, outcome) // a job that is gone counts as missing
}

// recount counts line i as its job ended; a job that is gone counts as missing.
func (s *Service) recount(ctx context.Context, b *record, i int, missing string) error {
	job, err := s.Store.GetJob(ctx, jobID(b.ID, i))
	if errors.Is(err, state.ErrNotFound) {
		_, err = s.Store.CountBatchLine(ctx, b.ID, i, missing)
		return err
	}
	if err != nil || !job.Status.Terminal() {
		return err
	}
	_, err = s.record(ctx, job)
	return err
}

// reconcile counts the lines whose job ended without being counted (its worker died
// between the two), so the batch does not wait for them forever.
func (s *Service) reconcile(ctx context.Context, b *record) error {
	return s.eachUnfinished(ctx, b, func(i int) error { return s.recount(ctx, b, i, state.LineFailed) })
}

// JobFinished counts a finished batch job — once, however often it is called — and,
// when it was the batch's last, asks the expander to finalize the batch. Jobs of no
// batch are ignored. Errors are logged: the job itself has ended, and a batch whose
// count was lost is repaired when it is next looked at.
func (s *Service) JobFinished(ctx context.Context, job *state.Job) error {
	if job == nil || job.Batch == "" || !job.Status.Terminal() {
		return nil
	}
	resolved, err := s.record(ctx, job)
	if err != nil {
		return fmt.Errorf("batch %s: counting job %s: %w", job.Batch, job.ID, err)
	}
	if i, ok := lineOf(job.Batch, job.ID); ok && !resolved && job.Kind == "research" {
		// A run's end makes room in the window: expansion goes on.
		if err := s.kick(ctx, job.Batch, job.Tenant, "line-"+strconv.Itoa(i)); err != nil {
			s.Log.Warn("batch: queueing expansion", "batch", job.Batch, "err", err)
		}
	}
	if resolved {
		// A lost finalization is repaired by the sweep; counting is what must not be lost.
		if err := s.kick(ctx, job.Batch, job.Tenant, "finalize"); err != nil {
			s.Log.Warn("batch: queueing finalization", "batch", job.Batch, "err", err)
		}
	}
	return nil
}

// record counts a finished job of a batch; it reports whether that resolved the batch.
func (s *Service) record(ctx context.Context, job *state.Job) (bool, error) {
	i, ok := lineOf(job.Batch, job.ID)
	if !ok {
		return false, nil
	}
	return s.Store.CountBatchLine(ctx, job.Batch, i, outcomeOf(job))
}

// outcomeOf is how a finished job counts: a job failed by its deadline (which is
// the batch's expiry) or by the expiry sweep counts as expired.
func outcomeOf(job *state.Job) string {
	switch job.Status {
	case state.Completed:
		return state.LineCompleted
	case state.Cancelled:
		return state.LineCancelled
	}
	if job.Error != nil && (job.Error.Code == "job_deadline_exceeded" || job.Error.Code == jobs.BatchExpired().Code) {
		return state.LineExpired
	}
	return state.LineFailed
}

// kick asks the expander to drive a batch for a reason ("cancel", "finalize",
// "repair-…"). Each reason is its own message (its id names it), so a kick is not
// dropped as a duplicate of the batch's expansion message, and the same kick sent
// twice is one.
func (s *Service) kick(ctx context.Context, id, tenant, reason string) error {
	m, err := bus.Encode(bus.SubjectExpand, bus.BatchExpand{BatchID: id, Tenant: tenant})
	if err != nil {
		return err
	}
	m.Header.Set(nats.MsgIdHdr, bus.BatchExpand{BatchID: id}.MsgID()+":"+reason)
	if err := s.Bus.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("batch %s: queueing %s: %w", id, reason, err)
	}
	return nil
}

// repairIfStale kicks a batch that has made no progress for staleAfter, or whose
// window has ended, at most once per staleAfter. It is called when a batch is looked
// at, and by Sweep.
func (s *Service) repairIfStale(ctx context.Context, b *record) {
	if Ended(b.Status) {
		return
	}
	now := time.Now()
	if now.Sub(b.ProgressAt) < staleAfter && (now.Before(b.Expires) || b.Status == state.BatchCancelling) {
		return
	}
	bucket := now.Unix() / int64(staleAfter/time.Second)
	if err := s.kick(ctx, b.ID, b.Tenant, "repair-"+strconv.FormatInt(bucket, 10)); err != nil {
		s.Log.Warn("batch: queueing a repair", "batch", b.ID, "err", err)
	}
}

// Sweep looks at every batch that has not ended, every interval until ctx ends, and
// kicks the stale and the expired ones (see repairIfStale), so a batch nobody polls
// still ends on time. Every ingress may run it: the kicks of one interval are the
// same messages, which the stream keeps once.
func (s *Service) Sweep(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ids, err := s.Store.ActiveBatches(ctx)
		if err != nil {
			s.Log.Warn("batch: sweeping", "err", err)
			continue
		}
		for _, id := range ids {
			b, err := s.Store.GetBatch(ctx, id)
			if errors.Is(err, state.ErrNotFound) {
				s.Store.ForgetActiveBatch(ctx, id)
			}
			if err == nil {
				s.repairIfStale(ctx, b)
			}
		}
		s.sweepFiles(ctx)
	}
}

// DeadLettered handles a batch-expander message that failed every delivery: a batch
// still expanding cannot run, so it ends failed with the reason (jobs it already
// started finish on their own); a kick of a batch past expansion changes nothing —
// the batch is repaired when it is next looked at. A message that spent its
// deliveries waiting for the lease of a driver still at work fails nothing: that
// driver expands the batch (a slow expansion on a loaded machine outlasts ten lease
// waits), and if it dies, its lease lapses and the repair sweep resumes the batch.
// It is the chat worker's dead-letter hook for bus.BatchExpand messages.
func (s *Service) DeadLettered(ctx context.Context, dl bus.DeadLetter) error {
	m, _, err := bus.Decode[bus.BatchExpand](dl.Data)
	if err != nil {
		return nil
	}
	b, err := s.Store.GetBatch(ctx, m.BatchID)
	if err != nil || Ended(b.Status) || b.ExpandDone {
		return ignoreGone(err)
	}
	release, _, err := s.Store.HoldBatch(ctx, b.ID, state.NewID("dlq_"), leaseTTL)
	if err != nil {
		return err
	}
	if release == nil {
		s.Log.Info("batch: a dead-lettered kick of a batch another process is driving", "batch", b.ID, "reason", dl.Reason)
		return nil
	}
	defer release(true)
	if b, err = s.Store.GetBatch(ctx, b.ID); err != nil || Ended(b.Status) || b.ExpandDone {
		return ignoreGone(err)
	}
	if _, err := s.Store.AdvanceBatch(ctx, b.ID, b.Expanded, true); err != nil {
		return err
	}
	s.failBatch(ctx, b, newLineError(0, "expansion_failed", "", "the batch could not be expanded after %d attempts: %s", dl.Deliveries, dl.Reason))
	b, err = s.Store.GetBatch(ctx, b.ID)
	if err != nil {
		return ignoreGone(err)
	}
	return s.notify(ctx, b)
}
