package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/searchfleet/searchfleet/pkg/spend"
)

// Research are the research runs (pkg/research): their records, their event lists,
// their children's ends, their spend against their budgets, and the tenants' indexes
// and in-flight shares. A run's hash holds all of its state; every write to it is
// first-write-wins or counted once, so any step of a run can be redelivered.
type Research struct{ *core }

// The research run statuses. A run ends in exactly one of the terminal three.
const (
	RunQueued         = "queued"
	RunInProgress     = "in_progress"
	RunRequiresAction = "requires_action"
	RunCompleted      = "completed"
	RunFailed         = "failed"
	RunCancelled      = "cancelled"
)

// RunEnded reports whether a run status is terminal.
func RunEnded(status string) bool {
	return status == RunCompleted || status == RunFailed || status == RunCancelled
}

// run is a research run as its hash holds it. pkg/research gives the JSON fields
// their meaning; the store keeps them as they are written.
type Run struct {
	ID       string
	Tenant   string
	Status   string
	Request  json.RawMessage // the run's request as pkg/research encodes it
	Created  time.Time
	Updated  time.Time
	Finished time.Time
	Deadline time.Time
	// Plan is the run's plan (first write wins); Approved is set once a plan under
	// review is approved (or replaced: PlanReplaced).
	Plan         json.RawMessage
	Approved     bool
	PlanReplaced bool
	// Cancel is set when a client asked to cancel the run.
	Cancel bool
	// Agent names the provider agent that carries the run out ("" the fleet);
	// AgentID is the provider's run id, stored under a claim (first write wins),
	// AgentCursor the poll cursor. AgentGroup is the provider's group the run is
	// submitted into, stored before the submit (Parallel's task group, which lists
	// its runs); AgentApprovals counts the plan approvals the provider refused.
	Agent, AgentID, AgentCursor string
	AgentGroup, AgentApprovals  string
	// Rounds are the rounds of sub-questions, by number.
	Rounds []RunRound
	// Ended is each child's terminal status, by job id; Findings what each ended
	// child found (pkg/research's JSON).
	Ended    map[string]string
	Findings map[string]json.RawMessage
	// Draft is the writer's report before verification; Result the verified output
	// (both first write wins).
	Draft, Result json.RawMessage
	// Incomplete is why the run stopped short ("budget", "deadline"; "" it did not).
	Incomplete string
	Error      json.RawMessage
	// Spent and Held are micro-USD: spent in all and by kind (model, search,
	// fetch), and held for steps in flight.
	Spent       int64
	SpentByKind map[string]int64
	Held        int64
	// Share is the key of the run's in-flight share ("" none): dropped when it ends.
	Share string
	// Notified is the status whose callback delivery was queued last (RunNotified):
	// a run whose status is not it may still owe its callback one.
	Notified string
}

// RunRound is one round of a run's sub-questions.
type RunRound struct {
	// Questions are the round's sub-questions (nil: the round has none yet).
	Questions json.RawMessage
	// Submitted is how many children the round submitted (0: not yet).
	Submitted int
	// Ended is how many of them have ended.
	Ended int
	// Reflection is the reflection step's verdict on the round (nil: none yet).
	Reflection json.RawMessage
}

// RunEvent is one event of a run, Seq its id (from 1).
type RunEvent struct {
	Seq  int
	Data json.RawMessage
}

// The hash fields of a run: per round r the questions (rq:r), submitted (rs:r),
// ended (re:r) and reflection (rf:r); per child end:<job>; per paid step hold:<step>
// and paid:<step>; per event key ev:<key>.
const (
	runFieldPlan     = "plan"
	RunFieldDraft    = "draft"
	RunFieldResult   = "result"
	RunFieldAgentID  = "agent_id"
	runFieldApproved = "approved"
)

// RunQuestionsField names round r's sub-questions (a first-write field).
func RunQuestionsField(r int) string { return "rq:" + strconv.Itoa(r) }

// RunSubmittedField names the number of children round r submitted.
func RunSubmittedField(r int) string { return "rs:" + strconv.Itoa(r) }

// RunReflectionField names round r's reflection (a first-write field).
func RunReflectionField(r int) string { return "rf:" + strconv.Itoa(r) }

// RunPlanField names the plan (a first-write field).
const RunPlanField = runFieldPlan

// CreateRun records a new research run (status queued) and indexes it under its
// tenant. With share set (a hash of the request), a run of the same tenant with the
// same share that has not ended is returned instead (its id; "" when a new one was
// made). ErrExists when the id is taken.
func (s *Research) CreateRun(ctx context.Context, r *Run, share string) (string, error) {
	now := time.Now().UTC()
	if r.Created.IsZero() {
		r.Created = now
	}
	r.Updated, r.Status = r.Created, RunQueued
	if share != "" {
		k := s.K.runShare(r.Tenant, share)
		ok, err := s.r.SetNX(ctx, k, r.ID, s.Retention).Result()
		if err != nil {
			return "", fmt.Errorf("state: sharing a run: %w", err)
		}
		if !ok {
			id, err := s.r.Get(ctx, k).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return "", fmt.Errorf("state: sharing a run: %w", err)
			}
			if prev, err := s.GetRun(ctx, id); err == nil && !RunEnded(prev.Status) && prev.Tenant == r.Tenant {
				return prev.ID, nil
			}
			// A share left by a run that ended, or by a writer that died before it
			// made its run: this one takes it.
			if err := s.r.Set(ctx, k, r.ID, s.Retention).Err(); err != nil {
				return "", fmt.Errorf("state: sharing a run: %w", err)
			}
		}
		r.Share = k
	}
	fields := []any{"id", r.ID, "tenant", r.Tenant, "status", r.Status, "request", []byte(r.Request),
		"created", Millis(r.Created), "updated", Millis(r.Updated), "deadline", Millis(r.Deadline), "agent", r.Agent, "share", r.Share}
	n, err := createJob.Run(ctx, s.r, []string{s.K.run(r.ID)}, append([]any{s.Retention.Milliseconds()}, fields...)...).Int()
	if err != nil {
		return "", fmt.Errorf("state: creating a run: %w", err)
	}
	if n == 0 {
		return "", ErrExists
	}
	k := s.K.tenantRuns(r.Tenant)
	if _, err := s.r.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, k, redis.Z{Score: float64(r.Created.UnixMilli()), Member: r.ID})
		p.PExpire(ctx, k, s.Retention)
		return nil
	}); err != nil {
		return "", fmt.Errorf("state: indexing a run: %w", err)
	}
	return "", nil
}

// GetRun reads a run (ErrNotFound when there is none, or it expired).
func (s *Research) GetRun(ctx context.Context, id string) (*Run, error) {
	m, err := s.r.HGetAll(ctx, s.K.run(id)).Result()
	if err != nil {
		return nil, fmt.Errorf("state: reading a run: %w", err)
	}
	if m["id"] == "" {
		return nil, ErrNotFound
	}
	return runOf(m), nil
}

func runOf(m map[string]string) *Run {
	raw := func(k string) json.RawMessage {
		if v := m[k]; v != "" {
			return json.RawMessage(v)
		}
		return nil
	}
	num := func(k string) int64 { n, _ := strconv.ParseInt(m[k], 10, 64); return n }
	r := &Run{ID: m["id"], Tenant: m["tenant"], Status: m["status"], Request: raw("request"),
		Created: FromMillis(m["created"]), Updated: FromMillis(m["updated"]), Finished: FromMillis(m["finished"]), Deadline: FromMillis(m["deadline"]),
		Plan: raw(runFieldPlan), Approved: m[runFieldApproved] != "", PlanReplaced: m[runFieldApproved] == "replaced", Cancel: m["cancel"] == "1",
		Agent: m["agent"], AgentID: m[RunFieldAgentID], AgentCursor: m["agent_cursor"],
		AgentGroup: m["agent_group"], AgentApprovals: m["agent_approvals"],
		Draft: raw(RunFieldDraft), Result: raw(RunFieldResult), Incomplete: m["incomplete"], Error: raw("error"), Notified: m["notified"],
		Spent: num("spent"), Held: num("held"), SpentByKind: map[string]int64{}, Ended: map[string]string{}, Findings: map[string]json.RawMessage{}, Share: m["share"]}
	for k, v := range m {
		switch {
		case strings.HasPrefix(k, "end:"):
			r.Ended[k[4:]] = v
		case strings.HasPrefix(k, "kid:"):
			r.Findings[k[4:]] = json.RawMessage(v)
		case strings.HasPrefix(k, "spent:"):
			r.SpentByKind[k[6:]] = num(k)
		}
	}
	for i := 0; ; i++ {
		q := raw(RunQuestionsField(i))
		if q == nil {
			break
		}
		sub, _ := strconv.Atoi(m[RunSubmittedField(i)])
		ended, _ := strconv.Atoi(m["re:"+strconv.Itoa(i)])
		r.Rounds = append(r.Rounds, RunRound{Questions: q, Submitted: sub, Ended: ended, Reflection: raw(RunReflectionField(i))})
	}
	return r
}

// RunUpdate is one write to a run that has not ended.
type RunUpdate struct {
	// Status moves the run ("" keeps it); a terminal one ends it, once.
	Status string
	// First is a field written only where it holds nothing, with Value; when it
	// holds something, nothing of the update is written (ErrAnswerStood).
	First string
	Value []byte
	// Events are appended, each once by its key (a redelivered step appends none
	// twice).
	Events []RunEventIn
	// Fields are field/value pairs.
	Fields []any
}

// RunEventIn is an event to append: Key makes it once, Data is its JSON.
type RunEventIn struct {
	Key  string
	Data []byte
}

// UpdateRun writes u to a run that has not ended. It reports whether it wrote:
// false when the run has ended (or does not exist); ErrAnswerStood when u.First held
// a value. A terminal status drops the run's share.
func (s *Research) UpdateRun(ctx context.Context, id string, u RunUpdate) (bool, error) {
	argv := []any{Millis(time.Now()), u.Status, u.First, u.Value, len(u.Events)}
	for _, e := range u.Events {
		argv = append(argv, e.Key, e.Data)
	}
	for i := 0; i+1 < len(u.Fields); i += 2 {
		v := u.Fields[i+1]
		switch x := v.(type) {
		case json.RawMessage:
			v = []byte(x)
		case time.Time:
			v = Millis(x)
		}
		argv = append(argv, u.Fields[i], v)
	}
	n, err := researchUpdate.Run(ctx, s.r, []string{s.K.run(id), s.K.runEvents(id)}, argv...).Int()
	if err != nil {
		return false, fmt.Errorf("state: updating a run: %w", err)
	}
	if n == 2 {
		return false, ErrAnswerStood
	}
	if n == 1 && RunEnded(u.Status) {
		if share, err := s.r.HGet(ctx, s.K.run(id), "share").Result(); err == nil && share != "" {
			// Only this run's share: another run may have taken it since.
			s.r.Eval(ctx, `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`, []string{share}, id)
		}
	}
	return n == 1, nil
}

// RunNotified records that the callback delivery of a run's status was queued
// (Run.Notified), ended or not; nothing when the run does not exist.
func (s *Research) RunNotified(ctx context.Context, id, status string) error {
	err := s.r.Eval(ctx, `if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[1], 'notified', ARGV[1]) end return 0`, []string{s.K.run(id)}, status).Err()
	if err != nil {
		return fmt.Errorf("state: marking a run notified: %w", err)
	}
	return nil
}

// researchUpdate is UpdateRun's write. (lua/research_update.lua)
var researchUpdate = script("research_update")

// researchChild is ChildEnded's write. (lua/research_child.lua)
var researchChild = script("research_child")

// ChildEnded counts a child job of round r of a run as ended, once, with its model
// and search spend (USD), its finding (kept in Run.Findings) and its events, and returns how many of the round's
// children have ended and how many it submitted. ErrNotFound when the run is gone.
func (s *Research) ChildEnded(ctx context.Context, runID string, round int, child, status string, modelUSD, searchUSD float64, finding []byte, events []RunEventIn) (ended, submitted int, err error) {
	argv := []any{round, child, status, spend.Micros(modelUSD), spend.Micros(searchUSD), finding, len(events)}
	for _, e := range events {
		argv = append(argv, e.Key, e.Data)
	}
	v, err := researchChild.Run(ctx, s.r, []string{s.K.run(runID), s.K.runEvents(runID)}, argv...).Int64Slice()
	if err != nil || len(v) != 2 {
		return 0, 0, fmt.Errorf("state: counting a child's end: %v", err)
	}
	if v[0] < 0 {
		return 0, 0, ErrNotFound
	}
	return int(v[0]), int(v[1]), nil
}

// researchReserve and researchSettle hold and settle a run's paid steps.
// (lua/research_reserve.lua, lua/research_settle.lua)
var (
	researchReserve = script("research_reserve")
	researchSettle  = script("research_settle")
)

// ErrRunBudget means the run's budget refused a step: nothing is held.
var ErrRunBudget = errors.New("state: the run's budget is spent")

// ReserveRun holds usd for a paid step of a run against its cap (max_usd; 0: none)
// before the step is made: nil when it is held (or was held or paid before: a
// redelivery), ErrRunBudget when the cap refuses it.
func (s *Research) ReserveRun(ctx context.Context, runID, step string, usd, capUSD float64) error {
	c := int64(-1)
	if capUSD > 0 {
		c = spend.Micros(capUSD)
	}
	v, err := researchReserve.Run(ctx, s.r, []string{s.K.run(runID)}, step, spend.Micros(usd), c).Text()
	switch {
	case err != nil:
		return fmt.Errorf("state: reserving a run's step: %w", err)
	case v == "over":
		return ErrRunBudget
	case v == "gone":
		return ErrNotFound
	}
	return nil
}

// SettleRun counts what a paid step of a run cost (kind model, search or fetch) and
// releases its hold, once.
func (s *Research) SettleRun(ctx context.Context, runID, step, kind string, usd float64) error {
	if err := researchSettle.Run(ctx, s.r, []string{s.K.run(runID)}, step, spend.Micros(usd), kind).Err(); err != nil {
		return fmt.Errorf("state: settling a run's step: %w", err)
	}
	return nil
}

// runEvents returns up to n of a run's events after the one with id after (0: from
// the first).
func (s *Research) RunEvents(ctx context.Context, id string, after, n int) ([]RunEvent, error) {
	v, err := s.r.LRange(ctx, s.K.runEvents(id), int64(after), int64(after+n-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("state: reading a run's events: %w", err)
	}
	out := make([]RunEvent, len(v))
	for i, e := range v {
		out[i] = RunEvent{Seq: after + i + 1, Data: json.RawMessage(e)}
	}
	return out, nil
}

// TenantRuns returns up to limit of a tenant's runs, newest first, created before the
// run after ("" from the newest), and whether more follow.
func (s *Research) TenantRuns(ctx context.Context, tenant, after string, limit int) ([]*Run, bool, error) {
	k := s.K.tenantRuns(tenant)
	max := "+inf"
	if after != "" {
		sc, err := s.r.ZScore(ctx, k, after).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, false, fmt.Errorf("state: listing runs: %w", err)
		}
		if err == nil {
			max = "(" + strconv.FormatInt(int64(sc), 10)
		}
	}
	ids, err := s.r.ZRevRangeByScore(ctx, k, &redis.ZRangeBy{Max: max, Min: "-inf", Count: int64(limit + 1)}).Result()
	if err != nil {
		return nil, false, fmt.Errorf("state: listing runs: %w", err)
	}
	more := len(ids) > limit
	if more {
		ids = ids[:limit]
	}
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	if _, err := s.r.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, s.K.run(id))
		}
		return nil
	}); err != nil {
		return nil, false, fmt.Errorf("state: listing runs: %w", err)
	}
	var out []*Run
	for i, c := range cmds {
		if m := c.Val(); m["id"] != "" && m["tenant"] == tenant {
			out = append(out, runOf(m))
		} else {
			s.r.ZRem(ctx, k, ids[i]) // expired
		}
	}
	return out, more, nil
}

// ClaimAgentRun stores the provider's run id of a run carried out by an agent, first
// write wins: it returns the id that stands.
func (s *Research) ClaimAgentRun(ctx context.Context, runID, providerID string) (string, error) {
	k := s.K.run(runID)
	if _, err := s.r.HSetNX(ctx, k, RunFieldAgentID, providerID).Result(); err != nil {
		return "", fmt.Errorf("state: claiming an agent run: %w", err)
	}
	v, err := s.r.HGet(ctx, k, RunFieldAgentID).Result()
	if err != nil {
		return "", fmt.Errorf("state: claiming an agent run: %w", err)
	}
	return v, nil
}
