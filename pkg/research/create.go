package research

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Create records a validated run of tenant and publishes its first step: the one
// way a run starts, for every front door (POST /v1/research, a background Responses
// request, MCP, a batch line). Unless noShare, a run of the same tenant with the
// same request that has not ended is returned instead (shared true). timeout bounds
// the run when its budget names no deadline. id names the run ("" a new id); a run
// of that id recorded before is started again (its step is published again: a
// duplicate the stream drops, or a step that finds the run as it is).
func Create(ctx context.Context, b *bus.Bus, st *state.Store, tenant, id string, req *Request, timeout time.Duration, noShare bool) (*state.Run, bool, error) {
	raw, err := json.Marshal(req)
	if err != nil {
		return nil, false, err
	}
	now := time.Now().UTC()
	deadline := req.Budget.Deadline
	if deadline.IsZero() || (timeout > 0 && deadline.After(now.Add(timeout))) {
		deadline = now.Add(timeout)
	}
	if id == "" {
		id = state.NewID(IDPrefix)
	}
	r := &state.Run{ID: id, Tenant: tenant, Request: raw, Created: now, Deadline: deadline, Agent: req.Agent}
	share := ""
	if !noShare {
		share = shareKey(req)
	}
	existing, err := st.Research.CreateRun(ctx, r, share)
	if errors.Is(err, state.ErrExists) {
		err = nil
	} else if err != nil {
		return nil, false, err
	}
	if existing != "" {
		got, err := st.Research.GetRun(ctx, existing)
		return got, err == nil, err
	}
	if err := b.Publish(ctx, stepSubject(tenant, req.Batch), bus.ResearchStep{RunID: r.ID, Why: "start"}); err != nil {
		// Not accepted: the run is ended so nothing is left that no one will run.
		e, _ := json.Marshal(map[string]string{"code": "unavailable", "message": "The fleet could not take the run."})
		st.Research.UpdateRun(context.WithoutCancel(ctx), r.ID, state.RunUpdate{Status: state.RunFailed, Fields: []any{"error", e}})
		return nil, false, errors.Join(ErrUnavailable, err)
	}
	got, err := st.Research.GetRun(ctx, r.ID)
	return got, false, err
}

// ErrUnavailable means the fleet could not take a run (its queue refused it).
var ErrUnavailable = errors.New("research: the fleet could not take the run")

// shareKey is what makes two requests the same run: everything but the callback and
// metadata.
func shareKey(req *Request) string {
	c := *req
	c.Callback, c.Metadata = nil, nil
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// Approve resumes a run waiting at requires_action with its plan, or with plan in its
// place (non-nil: the replaced plan runs as replaced, bounded by its effort). It
// reports false when the run does not wait for a plan.
func Approve(ctx context.Context, b *bus.Bus, st *state.Store, r *state.Run, plan *Plan) (bool, error) {
	if r.Status != state.RunRequiresAction {
		return false, nil
	}
	var req Request
	json.Unmarshal(r.Request, &req)
	u := state.RunUpdate{Status: state.RunInProgress, Fields: []any{"approved", "1"}}
	if plan != nil {
		plan.Questions = clean(plan.Questions, EffortOf(req.Effort).Breadth)
		if len(plan.Questions) == 0 {
			return false, errors.New("plan: at least one question")
		}
		pb, _ := json.Marshal(plan)
		u.Fields = []any{"approved", "replaced", state.RunPlanField, pb}
		u.Events = []state.RunEventIn{ev("plan:replaced", "plan", map[string]any{"plan": plan, "replaced": true})}
	}
	ok, err := st.Research.UpdateRun(ctx, r.ID, u)
	if err != nil || !ok {
		return false, err
	}
	return true, b.Publish(ctx, stepSubject(r.Tenant, req.Batch), bus.ResearchStep{RunID: r.ID, Why: "approve"})
}

// stepSubject is the lane of the steps of a run of tenant's: band batch (its
// batch's lane) for a batch line's run, else band async. The brain calls a step makes
// wait in the band of the run, as its children do.
func stepSubject(tenant, batch string) string {
	if batch != "" {
		return bus.SubjectResearchOf(bus.BandBatch, tenant, batch)
	}
	return bus.SubjectResearchOf(bus.BandAsync, tenant, "")
}

// runSubject is the lane of run r's steps.
func runSubject(r *state.Run) string {
	var req Request
	json.Unmarshal(r.Request, &req)
	return stepSubject(r.Tenant, req.Batch)
}

// Service is what the front doors use: the ingress, MCP, batches and the Responses
// API start, read, follow, cancel and approve runs through it.
type Service struct {
	Bus   *bus.Bus
	Store *state.Store
	// Models are the chat models a run's brain may be.
	Models []string
	// Timeout bounds a run whose budget names no deadline.
	Timeout time.Duration
	// Agents are the configured research agents a run may name (GET
	// /v1/research/agents lists them), by name.
	Agents []AgentInfo
	// Backends are the agents as this process calls them: the ingress verifies and
	// reads their webhooks with them (AgentWebhook).
	Backends map[string]*AgentBackend
	// WebhookSecrets are the agents' webhook secrets, by agent name.
	WebhookSecrets map[string]string
	// Failpoint, if set, is called at named points between a request's writes
	// ("research.cancel_recorded": a cancel is recorded, its step not yet
	// published): the crash tests kill or fail the process exactly there. Nil in
	// production.
	Failpoint func(name string)
}

// AgentInfo is a configured research agent as GET /v1/research/agents shows it.
type AgentInfo struct {
	Name     string             `json:"name"`
	Kind     string             `json:"kind"`
	PriceUSD map[string]float64 `json:"price_usd"`
	// Models are the Responses model names that run this agent.
	Models []string `json:"models,omitempty"`
}

// AgentOfModel is the agent a Responses request's model names ("" for none).
func (s *Service) AgentOfModel(model string) string {
	for _, a := range s.Agents {
		if slices.Contains(a.Models, model) {
			return a.Name
		}
	}
	return ""
}

// ErrNoAgent means a request names no research agent this fleet has.
var ErrNoAgent = errors.New("research: no such agent")

// ErrNoModel means a request names no research model this fleet has.
var ErrNoModel = errors.New("research: no such model")

// Resolve fills in the brain of a request from its model: "research/<brain>", or a
// chat model's own name.
func (s *Service) Resolve(req *Request) error {
	if req.Agent != "" {
		if !slices.ContainsFunc(s.Agents, func(a AgentInfo) bool { return a.Name == req.Agent }) {
			return ErrNoAgent
		}
		if req.Model == "" {
			req.Model = req.Agent
		}
		return nil
	}
	brain := strings.TrimPrefix(req.Model, ModelPrefix)
	if req.Model == "" && len(s.Models) > 0 {
		brain = s.Models[0]
		req.Model = ModelPrefix + brain
	}
	if !slices.Contains(s.Models, brain) {
		return ErrNoModel
	}
	req.Brain = brain
	return nil
}

// Start validates, resolves and creates a run of tenant (Create).
func (s *Service) Start(ctx context.Context, tenant string, req *Request, noShare bool) (*state.Run, bool, error) {
	if err := s.validate(req); err != nil {
		return nil, false, err
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = time.Hour
	}
	return Create(ctx, s.Bus, s.Store, tenant, "", req, timeout, noShare)
}

// LineRunID is the id of the run of a batch line's job: derived, so a batch line
// expanded again starts the same run.
func LineRunID(lineJob string) string { return IDPrefix + lineJob }

// StartLine starts the run of a batch line (its job lineJob of batch): never shared,
// ended by the batch's expiry at the latest. The request was validated with the
// batch; it is validated again here.
func (s *Service) StartLine(ctx context.Context, tenant, batch, lineJob string, req *Request, expires time.Time) (*state.Run, error) {
	if err := s.validate(req); err != nil {
		return nil, err
	}
	req.Batch, req.Line, req.Surface, req.Callback = batch, lineJob, "batch", nil
	if d := req.Budget.Deadline; d.IsZero() || d.After(expires) {
		req.Budget.Deadline = expires
	}
	run, _, err := Create(ctx, s.Bus, s.Store, tenant, LineRunID(lineJob), req, time.Until(expires), true)
	return run, err
}

// validate validates (the client's errors ErrInvalid) and resolves a request.
func (s *Service) validate(req *Request) error {
	if err := req.Validate(); err != nil {
		return invalid{err}
	}
	return s.Resolve(req)
}

// ErrInvalid matches (errors.Is) the errors of Start that are the client's to fix;
// their text is client-safe.
var ErrInvalid = errors.New("research: invalid request")

type invalid struct{ err error }

func (e invalid) Error() string        { return e.err.Error() }
func (e invalid) Unwrap() error        { return e.err }
func (e invalid) Is(target error) bool { return target == ErrInvalid }

// Get reads tenant's run id (state.ErrNotFound for another tenant's).
func (s *Service) Get(ctx context.Context, tenant, id string) (*state.Run, error) {
	if !strings.HasPrefix(id, IDPrefix) || len(id) > 64 {
		return nil, state.ErrNotFound
	}
	r, err := s.Store.Research.GetRun(ctx, id)
	if err == nil && r.Tenant != tenant {
		return nil, state.ErrNotFound
	}
	return r, err
}

// Cancel cancels tenant's run id: false when it has ended. The run ends cancelled at
// once and the cancel reaches the provider of an agent's run; the run's next step (why
// "cancel") cancels its children and tells its callback. Until that step is
// published the run's id waits in the reaper's deadline set, due cancelSwept from
// now: a process that dies between recording the cancel and publishing its step
// leaves it there, and the reaper's sweep publishes the step (Worker.SweepCancel).
func (s *Service) Cancel(ctx context.Context, tenant, id string) (bool, error) {
	r, err := s.Get(ctx, tenant, id)
	if err != nil {
		return false, err
	}
	if err := s.Store.Jobs.RestoreDeadline(ctx, id, time.Now().Add(cancelSwept)); err != nil {
		return false, err
	}
	ok, err := s.Store.Research.UpdateRun(ctx, id, state.RunUpdate{Status: state.RunCancelled, Fields: []any{"cancel", "1"},
		Events: []state.RunEventIn{ev("done", "done", map[string]any{"status": state.RunCancelled})}})
	if err != nil || !ok {
		s.Store.Jobs.ForgetDeadline(context.WithoutCancel(ctx), id)
		return false, err
	}
	if s.Failpoint != nil {
		s.Failpoint("research.cancel_recorded")
	}
	if err = s.Bus.Publish(ctx, runSubject(r), bus.ResearchStep{RunID: id, Why: "cancel"}); err == nil {
		// Were this lost, the sweep's step would be a duplicate the stream drops.
		s.Store.Jobs.ForgetDeadline(ctx, id)
	}
	if b := s.Backends[r.Agent]; b != nil && r.AgentID != "" {
		// Cancel reaches the provider (a run still being submitted is cancelled there
		// by the worker's step, which finds it cancelled).
		if cerr := b.Agent.Cancel(ctx, r.AgentID); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}
	return true, err
}

// cancelSwept is how long after a cancel the reaper's sweep publishes its step, if
// the process that recorded it did not: far longer than a publish takes, far
// shorter than the stream's duplicate window.
const cancelSwept = 5 * time.Second

// SweepCancel publishes again the cancel step of run id, and cancels its provider's
// run: the reaper gives it each overdue id that names no job, and a run's id is one
// only while its cancel's step may not be out (Service.Cancel). Any other id, and a
// run not cancelled (the process died before it recorded the cancel), is left alone.
func (w *Worker) SweepCancel(ctx context.Context, id string) error {
	if !strings.HasPrefix(id, IDPrefix) {
		return nil
	}
	r, err := w.Store.Research.GetRun(ctx, id)
	if errors.Is(err, state.ErrNotFound) {
		return nil
	}
	if err != nil || !r.Cancel {
		return err
	}
	w.log().Warn("research: a cancel's step may not have been published; the sweep publishes it", "run", id)
	w.agentCancel(ctx, r)
	return w.Bus.Publish(ctx, runSubject(r), bus.ResearchStep{RunID: id, Why: "cancel"})
}
