package research

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/chat"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/spend"
	"github.com/searchfleet/searchfleet/pkg/state"
	"github.com/searchfleet/searchfleet/pkg/webhook"
)

// Worker takes research runs' steps: the "researcher" consumer's handler. It holds no
// run state between messages.
type Worker struct {
	Bus   *bus.Bus
	Store *state.Store
	// Models are the chat models a run's brain may be.
	Models map[string]chat.Model
	Ender  *jobs.Ender
	// Webhooks queues the runs' callbacks (nil: none are sent).
	Webhooks *webhook.Service
	// Budgets are the tenants' budgets a brain call is reserved against (nil: none).
	Budgets *spend.Budgets
	Log     *slog.Logger
	// ID names this worker in leases; LeaseTTL bounds how long a dead worker's run
	// step stays claimed.
	ID           string
	LeaseTTL     time.Duration
	ModelTimeout time.Duration
	// SearchUSD is the dearest search of the fleet's engines: a child's share of
	// a run's budget has room for its searches at that price.
	SearchUSD float64
	// Agents are the configured research agents by name; AgentPollEvery how often a
	// provider's run is polled (0: 10 s).
	Agents         map[string]*AgentBackend
	AgentPollEvery time.Duration
	// Failpoint, if set, is called at named points between a step's writes
	// ("research.after_end": a run's end is recorded, its callback's delivery not yet
	// queued; "research.agent_accepted", "research.agent_approved": a provider
	// accepted a run or a plan's approval, its id not yet stored): the crash tests
	// kill or fail a worker exactly there. Nil in production.
	Failpoint func(name string)
}

func (w *Worker) failpoint(name string) {
	if w.Failpoint != nil {
		w.Failpoint(name)
	}
}

func (w *Worker) log() *slog.Logger {
	if w.Log == nil {
		return slog.Default()
	}
	return w.Log
}

// maxActions bounds one step's actions (a run has at most a few dozen).
const maxActions = 64

// Handle takes a run's step: under the run's lease, it acts until the run waits (for
// its children, an approval) or ends. A step that finds another worker holding the
// lease retries once the lease would have lapsed: the holder re-reads the run as it
// lets go, so what prompted this step is not lost if it lives, and this retry takes
// it on if it died.
func (w *Worker) Handle(ctx context.Context, d *bus.Delivery[bus.ResearchStep]) error {
	id := d.Msg.RunID
	if !strings.HasPrefix(id, IDPrefix) {
		return bus.Permanent(fmt.Errorf("research: %q is not a run id", id))
	}
	// The lease's owner is this delivery, not this worker: two steps of one run in
	// one process must not both hold it.
	owner := w.ID + "/" + state.NewID("")
	for range maxActions {
		release, left, err := w.Store.Leases.Hold(ctx, w.Store.K.RunLease(id), owner, w.LeaseTTL)
		if err != nil {
			return err
		}
		if release == nil {
			return bus.Retry(left+100*time.Millisecond, errors.New("research: another worker holds the run"))
		}
		err = w.actHeld(ctx, id, d.Msg.Why, release)
		if errors.Is(err, errPollLater) {
			// A provider's run goes on: poll it again later, as a redelivery of this
			// step (a NakWithDelay); near the delivery limit as a fresh step.
			if d.MaxDeliver > 0 && d.Attempt >= d.MaxDeliver-1 {
				subject := bus.SubjectResearch
				if r, err := w.Store.Research.GetRun(ctx, id); err == nil {
					subject = runSubject(r)
				}
				return w.Bus.Publish(ctx, subject, bus.ResearchStep{RunID: id, Why: "agent poll"})
			}
			return bus.Defer(w.agentPoll(), err)
		}
		if err != nil {
			return err
		}
		// A child that ended while the lease was held had its step retry later: look
		// again now, with the lease let go.
		r, req, err := w.load(ctx, id)
		if errors.Is(err, state.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if next(factsOf(r, req, time.Now())).act == actWait {
			return nil
		}
	}
	return nil
}

// actHeld acts under the run's lease and lets the lease go however act ends: a
// panic (which the consumer turns into a retry) must not leave the lease renewed
// for ever, the run's steps all refused as another worker's.
func (w *Worker) actHeld(ctx context.Context, id, why string, release func(drop bool)) error {
	defer release(true)
	return w.act(ctx, id, why)
}

func (w *Worker) load(ctx context.Context, id string) (*state.Run, *Request, error) {
	r, err := w.Store.Research.GetRun(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	var req Request
	if err := json.Unmarshal(r.Request, &req); err != nil {
		return r, nil, bus.Permanent(fmt.Errorf("research: run %s: unreadable request: %w", id, err))
	}
	return r, &req, nil
}

// act runs the run's next actions until it waits or ends. A cancel's own step (why
// "cancel") cancels once whatever the run holds, though the API ended it with no
// child out (a run cancelled while it planned, or waited for its plan's approval):
// the callback hears of it, and a batch line's job ends.
func (w *Worker) act(ctx context.Context, id, why string) error {
	for n := range maxActions {
		r, req, err := w.load(ctx, id)
		if errors.Is(err, state.ErrNotFound) {
			w.log().Warn("research: a step for a run Redis does not know", "run", id)
			return nil
		}
		if err != nil {
			return err
		}
		f := factsOf(r, req, time.Now())
		if req.Line != "" && state.RunEnded(r.Status) {
			st, err := w.Store.Jobs.JobStatus(ctx, req.Line)
			if err != nil && !errors.Is(err, state.ErrNotFound) {
				return err
			}
			f.lineOpen = err == nil && !st.Terminal()
		}
		f.hookDue = w.hookDue(r, req)
		a := next(f)
		if n == 0 && why == "cancel" && r.Cancel && (a.act == actWait || a.act == actNotify) {
			a.act = actCancel
		}
		switch a.act {
		case actWait:
			return nil
		case actLine:
			err = w.endLine(ctx, r, req)
		case actNotify:
			err = w.notify(ctx, r, req, r.Status)
		case actCancel:
			err = w.cancel(ctx, r)
		case actAgent:
			err = w.agentStep(ctx, r, req)
		case actPlan:
			err = w.plan(ctx, r, req)
		case actReview:
			err = w.review(ctx, r, req, r.Plan, nil, nil)
		case actSubmit:
			err = w.submit(ctx, r, req, a.round)
		case actReflect:
			err = w.reflect(ctx, r, req, a.round)
		case actWrite:
			err = w.write(ctx, r, req)
		case actVerify:
			err = w.verify(ctx, r)
		case actComplete:
			err = w.complete(ctx, r, req)
		case actStop:
			err = w.stop(ctx, r, a.reason)
		case actFail:
			err = w.fail(ctx, r, req, a.reason, cmp.Or(failMessages[a.reason], "The run found nothing it could report."))
		}
		if err != nil && !errors.Is(err, state.ErrAnswerStood) {
			return err
		}
	}
	return nil
}

// failMessages are the client's text of the reasons a run fails with nothing found.
var failMessages = map[string]string{
	"budget":   "The run's budget was spent before anything was found.",
	"deadline": "The run's deadline passed before anything was found.",
}

// ev is a run event, deduplicated by key: its type and fields, made now.
func ev(key, typ string, fields map[string]any) state.RunEventIn {
	at := time.Now()
	m := map[string]any{"type": typ, "created_at": at.Unix(), "at_ms": at.UnixMilli()}
	maps.Copy(m, fields)
	b, _ := json.Marshal(m)
	return state.RunEventIn{Key: key, Data: b}
}

// plan asks the brain for the plan and stores it, first write wins.
func (w *Worker) plan(ctx context.Context, r *state.Run, req *Request) error {
	e := EffortOf(req.Effort)
	text, err := w.brain(ctx, r, req, "plan", planRequest(req, e))
	if err != nil {
		return w.brainFailed(ctx, r, req, err)
	}
	p := parsePlan(text, e.Breadth)
	if len(p.Questions) == 0 {
		p.Questions = []SubQuestion{{Question: clip(req.Input, maxQuestionChars)}}
	}
	b, _ := json.Marshal(p)
	_, err = w.Store.Research.UpdateRun(ctx, r.ID, state.RunUpdate{Status: state.RunInProgress, First: state.RunPlanField, Value: b,
		Events: []state.RunEventIn{ev("plan", "plan", map[string]any{"plan": p})}})
	return err
}

// brainFailed stops a run whose brain call its budget refused (it is then
// incomplete: budget), ends one whose call failed for good, or returns the error for
// the step to be retried.
func (w *Worker) brainFailed(ctx context.Context, r *state.Run, req *Request, err error) error {
	if errors.Is(err, errSpent) {
		_, err = w.Store.Research.UpdateRun(ctx, r.ID, state.RunUpdate{Fields: []any{"incomplete", "budget"}})
		return err
	}
	if refused(err) {
		return w.fail(ctx, r, req, "model_error", "The research model refused the request.")
	}
	if errors.Is(err, errNoBrain) {
		return w.fail(ctx, r, req, "model_not_found", fmt.Sprintf("The model %q does not exist.", clip(req.Brain, 64)))
	}
	return err
}

// review stops the run at requires_action with plan (and fields and events written
// with it), and tells the callback.
func (w *Worker) review(ctx context.Context, r *state.Run, req *Request, plan json.RawMessage, fields []any, events []state.RunEventIn) error {
	ok, err := w.Store.Research.UpdateRun(ctx, r.ID, state.RunUpdate{Status: state.RunRequiresAction, Fields: fields,
		Events: append(events, ev("requires_action", "requires_action", map[string]any{"plan": plan}))})
	if err != nil || !ok {
		return err
	}
	r.Status = state.RunRequiresAction
	return w.notify(ctx, r, req, "requires_action")
}

// childID is the id of child i of round n of a run: derived, so a redelivered
// submission submits the same jobs (jobs.Submit finds them recorded).
func childID(runID string, round, i int) string {
	return "job_" + strings.TrimPrefix(runID, IDPrefix) + "r" + strconv.Itoa(round) + "q" + strconv.Itoa(i)
}

// roundOf reads the round and index back from a child's id.
func roundOf(runID, child string) (round, i int, ok bool) {
	rest, found := strings.CutPrefix(child, "job_"+strings.TrimPrefix(runID, IDPrefix)+"r")
	if !found {
		return 0, 0, false
	}
	rs, is, found := strings.Cut(rest, "q")
	if !found {
		return 0, 0, false
	}
	round, err1 := strconv.Atoi(rs)
	i, err2 := strconv.Atoi(is)
	return round, i, err1 == nil && err2 == nil
}

// questionsOf reads a round's sub-questions.
func questionsOf(raw json.RawMessage) []SubQuestion {
	var qs []SubQuestion
	json.Unmarshal(raw, &qs)
	return qs
}

// writerReserve is the part of a run's max_usd kept for its writer when children
// are given their caps.
const writerReserve = 0.1

// submit submits a round's sub-questions as child jobs, all at once: each an ordinary
// chat job of the run's tenant with web_search and web_fetch, band async, its cap
// reserved against the run's budget first.
func (w *Worker) submit(ctx context.Context, r *state.Run, req *Request, round int) error {
	var qs []SubQuestion
	if round < len(r.Rounds) {
		qs = questionsOf(r.Rounds[round].Questions)
	} else {
		var p Plan
		json.Unmarshal(r.Plan, &p)
		qs = p.Questions
		b, _ := json.Marshal(qs)
		if _, err := w.Store.Research.UpdateRun(ctx, r.ID, state.RunUpdate{First: state.RunQuestionsField(round), Value: b}); err != nil && !errors.Is(err, state.ErrAnswerStood) {
			return err
		}
	}
	e := EffortOf(req.Effort)
	searches, fetches := e.Searches, e.Fetches
	usedSearches, usedFetches := used(r)
	if n := req.Budget.MaxSearches; n > 0 {
		searches = max(1, min(searches, (n-usedSearches)/max(1, len(qs))))
	}
	if n := req.Budget.MaxFetches; n > 0 {
		fetches = max(0, min(fetches, (n-usedFetches)/max(1, len(qs))))
	}
	capUSD := 0.0
	if m := req.Budget.MaxUSD; m > 0 {
		// The budget left (less the writer's part) is shared by the children; a share
		// too small for a child to answer at all submits fewer children instead.
		left := m*(1-writerReserve) - float64(r.Spent+r.Held)/1e6
		capUSD = max(left/float64(max(1, len(qs))), w.childFloor(req))
	}
	stopped := false // the budget cut the round short
	var pending []bus.Pending
	var events []state.RunEventIn
	for i, q := range qs {
		id := childID(r.ID, round, i)
		if n := req.Budget.MaxSearches; n > 0 && usedSearches+i*searches >= n {
			stopped = true // every child searches at least once
			break
		}
		if req.Budget.MaxUSD > 0 {
			err := state.ErrRunBudget
			if capUSD >= minChildUSD {
				err = w.Store.Research.ReserveRun(ctx, r.ID, id, capUSD, req.Budget.MaxUSD)
			}
			if errors.Is(err, state.ErrRunBudget) {
				stopped = true
				break
			} else if err != nil {
				return err
			}
		}
		job, err := w.childJob(r, req, id, q, searches, fetches, capUSD)
		if err != nil {
			return bus.Permanent(err)
		}
		p, err := jobs.Submit(ctx, w.Bus, w.Store.Jobs, job, bus.SubjectJob(job.Band, job.Tenant, job.Batch), bus.ChatJob{JobID: id, Tenant: r.Tenant})
		if err != nil {
			return err
		}
		pending = append(pending, p)
		events = append(events, ev("started:"+id, "subquestion.started", map[string]any{"round": round, "index": i, "job_id": id, "question": q.Question}))
	}
	for _, p := range pending {
		if err := bus.Wait(ctx, p); err != nil {
			return err
		}
	}
	submitted := len(pending)
	fields := []any{state.RunSubmittedField(round), submitted}
	if submitted == 0 {
		// A round with nothing submitted is marked submitted (-1 reads as 0 ended
		// of none) so the run goes on to write.
		fields[1], stopped = -1, true
	}
	if stopped {
		fields = append(fields, "incomplete", "budget")
	}
	ok, err := w.Store.Research.UpdateRun(ctx, r.ID, state.RunUpdate{Status: state.RunInProgress, Events: events, Fields: fields})
	if err == nil && !ok {
		// The run ended meanwhile (a cancel): the children just submitted go too.
		for i := range submitted {
			w.Ender.End(ctx, childID(r.ID, round, i), jobs.Ending{Status: state.Cancelled})
		}
	}
	return err
}

// minChildUSD is the least cap a child is submitted with: below it, the budget is
// spent.
const minChildUSD = 0.0001

// childFloor is the least a child is given of a run's budget: three of its brain's
// worst-case turns and one search at the fleet's dearest price (a search round and
// an answer, with room).
func (w *Worker) childFloor(req *Request) float64 {
	m := w.Models[req.Brain]
	return 3*m.Pricing.Cost(2000, maxOutput(m)) + w.SearchUSD
}

// childJob is a sub-question's job: a chat job of the run's tenant and brain in band
// async, asked to search (and read pages) for what the sub-question must establish.
// A batch line's child is a line of its batch's lane (band batch, the batch's cap)
// that the batch does not count: its id is no line's.
func (w *Worker) childJob(r *state.Run, req *Request, id string, q SubQuestion, searches, fetches int, capUSD float64) (*state.Job, error) {
	text := q.Question
	if q.Establish != "" {
		text += "\n\nEstablish: " + q.Establish
	}
	wr := &wire.Request{Model: req.Brain, System: childSystem,
		Messages: []wire.Message{{Role: wire.RoleUser, Parts: []wire.Part{{Kind: wire.PartText, Text: text}}}},
		Search:   &llm.SearchOptions{Requested: true, MaxUses: searches, Fetch: fetches > 0, MaxFetches: cmp.Or(fetches, -1), MaxCostUSD: capUSD}}
	stored, err := wire.EncodeStored(wire.OpenAIChat, wr)
	if err != nil {
		return nil, err
	}
	deadline := r.Deadline
	if deadline.IsZero() {
		deadline = time.Now().Add(time.Hour)
	}
	job := &state.Job{ID: id, Tenant: r.Tenant, Kind: "chat", Model: req.Brain, Request: stored, Question: clip(q.Question, 200),
		Created: time.Now().UTC(), Deadline: deadline, Parent: r.ID, Band: bus.BandAsync}
	if req.Batch != "" {
		job.Batch, job.Band = req.Batch, bus.BandBatch
	}
	return job, nil
}

// used counts the searches and fetches a run's ended children made.
func used(r *state.Run) (searches, fetches int) {
	for _, f := range findingsOf(r) {
		searches += f.Searches
		fetches += f.Fetches
	}
	return searches, fetches
}
