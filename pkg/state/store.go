// Package state keeps the fleet's shared state in Redis: job records while they are
// hot, the chain state of each running job (so any chat worker can resume any chain),
// idempotency claims that keep a redelivered step from paying for a model call or a
// search twice, deadlines, and rate limits. A Store holds one type per aggregate
// (Jobs, Chains, Searches, Batches, Files, Ledger, Leases, Webhooks,
// Conversations) over one client.
// Every key is built in keys.go; every script is a file of its own in lua/, its keys
// and arguments named at its top. Workers hold nothing between messages. What an
// ended job keeps for the retention period moves off Redis to an Archive
// (archive.go), leaving about a kilobyte behind.
package state

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Status is a job's status.
type Status string

// The job statuses. A job ends in exactly one of the terminal three.
const (
	Queued    Status = "queued"
	Running   Status = "running"
	Completed Status = "completed"
	Failed    Status = "failed"
	Cancelled Status = "cancelled"
)

// Terminal reports whether the job has ended.
func (s Status) Terminal() bool { return s == Completed || s == Failed || s == Cancelled }

// Job is a job record.
type Job struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant,omitempty"`
	// Kind is "chat" (a chat request through the model loop), "search" (one direct
	// search, no model) or "fetch" (one direct page fetch, no model).
	Kind   string `json:"kind"`
	Model  string `json:"model,omitempty"`
	Status Status `json:"status"`
	// Request is the validated client request.
	Request json.RawMessage `json:"request,omitempty"`
	Created time.Time       `json:"created_at"`
	Updated time.Time       `json:"updated_at"`
	// Finished is when the job reached a terminal status.
	Finished time.Time `json:"finished_at,omitzero"`
	Deadline time.Time `json:"deadline,omitzero"`
	// Response is the answer, in the protocol of the request.
	Response json.RawMessage `json:"response,omitempty"`
	Error    *JobError       `json:"error,omitempty"`
	Usage    json.RawMessage `json:"usage,omitempty"`
	// Trace lists the searches the job made.
	Trace json.RawMessage `json:"trace,omitempty"`
	// TraceID is the OpenTelemetry trace the job runs in (32 hex digits; "" when the
	// ingress that took it did not trace).
	TraceID string `json:"trace_id,omitempty"`
	// Question is the text of the request's last user turn, clipped, as job listings
	// show it (set by the front door; "" for jobs recorded before it was kept).
	Question string          `json:"question,omitempty"`
	Callback json.RawMessage `json:"callback,omitempty"`
	Batch    string          `json:"batch,omitempty"`
	// Band is the job's priority band ("sync", "async", "batch": bus.Bands), set when
	// it is created; its searches and resumes ride that band's lanes.
	Band string `json:"band,omitempty"`
	// WebhookStatus is "", "pending", "delivered" or "failed".
	WebhookStatus string `json:"webhook_status,omitempty"`
	// ReplayOf is the job this one replays: its searches are answered from that job's
	// recorded results, never searched.
	ReplayOf string `json:"replay_of,omitempty"`
	// Parent is the research run a child job belongs to ("" none): its end is
	// counted in the run (pkg/research's finish hook).
	Parent string `json:"parent,omitempty"`
	// HasStoredResponse is set on a job whose Responses request is stored (SaveResponse,
	// before the job is created): the job's hash notes it ("resp"), so archiving a job
	// without one reads no stored response.
	HasStoredResponse bool `json:"-"`
	// Unstored is set on a job whose request said store: false (a Responses request
	// answered on its connection): the job's hash notes it ("nostore"), and once the
	// job has ended and been answered only its summary is kept — no archived record
	// (see ArchiveJob and ForgetAnswer).
	Unstored bool `json:"-"`
	// FreshID is set where ID was just drawn by NewID and is not one an
	// Idempotency-Key, a batch line or a replayed submission can name again: no record
	// can hold it (120 random bits), so CreateJob may write the job without looking
	// for one (see CreateJob). Left unset, CreateJob checks and reports ErrExists.
	FreshID bool `json:"-"`

	// hot is the job's whole hash as ReadEnded read it (its chain, recorded results
	// and the rest with the record), which ArchiveEnded archives without reading it
	// again; nil when it was not read so.
	hot map[string]string
}

// JobError is why a job failed, in the OpenAI error vocabulary.
type JobError struct {
	// Status is the HTTP status a synchronous caller gets.
	Status  int    `json:"status"`
	Type    string `json:"type"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
}

func (e *JobError) Error() string { return e.Type + ": " + e.Message }

// Store is the fleet's Redis state: one aggregate per part of it, over one client.
// Each consumer takes the aggregate (or the few) its port names.
type Store struct {
	Jobs     *Jobs
	Chains   *Chains
	Searches *Searches
	Batches  *Batches
	Files    *Files
	Ledger   *Ledger
	Leases   *Leases
	Webhooks *Webhooks
	Research *Research
	// Conversations are the Conversations API's conversations and their items.
	Conversations *Conversations
	// K builds the store's keys.
	K Keys
	// Retention is how long job records and chain state live after creation.
	Retention time.Duration

	c *core
}

// Jobs are the job records: creating, reading and ending them, their deadlines, the
// tenants' job index, idempotency claims, archiving and stored responses.
type Jobs struct{ *core }

// Chains are the chat chains' state: the step a worker loads, the hops it saves and
// the results it records, and sticky conversations.
type Chains struct{ *core }

// Searches are the searches of a job's hops (start, hand-off, outcome), the search
// cache, the engines' rate limits and key cooldowns, and the recorded searches a
// replay answers from.
type Searches struct{ *core }

// Batches are the batch records and their progress.
type Batches struct{ *core }

// Files are the uploaded files' records.
type Files struct{ *core }

// Ledger is the money and the quota: spend reservations and settlements against the
// tenants' budgets, the per-request and per-batch caps, storage quota and spend per
// model.
type Ledger struct{ *core }

// Leases are the leases and locks: concurrency leases per tenant, the tenants' rate
// limit, and the leases that hold a hop, a search or a batch for one owner.
type Leases struct{ *core }

// Webhooks are the webhook secrets, the delivery status of jobs and batches, and the
// deferral counts of webhook deliveries.
type Webhooks struct{ *core }

// Conversations are the tenants' conversations (conversations.go).
type Conversations struct{ *core }

// core is what every aggregate shares: the client, the keys, and the caches of this
// process.
type core struct {
	r redis.UniversalClient
	K Keys
	// Retention is how long job records and chain state live after creation.
	Retention time.Duration
	// archive holds ended jobs' records (nil: they stay in Redis).
	archive Archive
	// ttls are the long-lived keys whose TTL this process set lately (see refreshes).
	ttls refreshes
	// inOrder is set when r is one Redis (not a cluster): the commands of one
	// pipeline run in the order sent, which CreateJob's write of a fresh job needs.
	inOrder bool
}

// Option adjusts a Store (New).
type Option func(*core)

// New returns a store over r with keys under prefix, keeping jobs for retention.
func New(r redis.UniversalClient, prefix string, retention time.Duration, opts ...Option) *Store {
	if retention <= 0 {
		retention = 7 * 24 * time.Hour
	}
	c := &core{r: r, K: NewKeys(prefix), Retention: retention}
	_, c.inOrder = r.(*redis.Client)
	for _, o := range opts {
		o(c)
	}
	return &Store{
		Jobs: &Jobs{c}, Chains: &Chains{c}, Searches: &Searches{c}, Batches: &Batches{c},
		Files: &Files{c}, Ledger: &Ledger{c}, Leases: &Leases{c}, Webhooks: &Webhooks{c}, Research: &Research{c},
		Conversations: &Conversations{c},
		K:             c.K, Retention: retention, c: c,
	}
}

// ErrNotFound means there is no such job (or it expired).
var ErrNotFound = errors.New("state: not found")

// ErrExists means a job with that id exists already.
var ErrExists = errors.New("state: job exists")

// Millis is how the fleet stores a time in a Redis hash: Unix milliseconds, "" for
// the zero time.
func Millis(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// FromMillis reads a time stored by Millis (the zero time for "" or garbage).
func FromMillis(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n == 0 {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewID returns a random id with a prefix ("job_…", "batch_…"): 120 random bits in
// lower-case letters and digits, so ids (and ids derived from them) are safe NATS
// subject tokens and Redis hash tags.
func NewID(prefix string) string {
	var b [15]byte
	rand.Read(b[:])
	return prefix + idEncoding.EncodeToString(b[:])
}

// createJob writes a job record unless the id exists. (lua/create_job.lua)
var createJob = script("create_job")

func (s *core) tryLock(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	return s.r.SetNX(ctx, key, owner, ttl).Result()
}

// scripts are loaded at start and re-loaded if Redis forgets them (a restart).
var scripts = []*redis.Script{createJob, setIfLive, saveTurn, recordDispatch, saveTurnCalls, recordResult, startSearch, saveOutcome, lease, release, gcra, setWebhookStatus}

// pipelined runs fn's commands in one round trip. Scripts in it are called by SHA;
// if Redis does not know one (it restarted), they are loaded and the pipeline is run
// once more: every script the fleet pipelines is safe to repeat.
func (s *core) pipelined(ctx context.Context, fn func(redis.Pipeliner)) error {
	for attempt := 0; ; attempt++ {
		_, err := s.r.Pipelined(ctx, func(p redis.Pipeliner) error { fn(p); return nil })
		if err == nil || attempt > 0 || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
			return err
		}
		if err := s.loadScripts(ctx); err != nil {
			return err
		}
	}
}

// LoadScripts loads the fleet's Lua scripts into Redis.
func (s *Store) LoadScripts(ctx context.Context) error { return s.c.loadScripts(ctx) }

func (s *core) loadScripts(ctx context.Context) error {
	for _, sc := range scripts {
		if err := sc.Load(ctx, s.r).Err(); err != nil {
			return fmt.Errorf("state: loading scripts: %w", err)
		}
	}
	return nil
}

// lease claims hop h of a job for owner for ttl. It returns true if owner holds it (a
// claim it already held is renewed), else false with the time the current one has
// left.
func (s *core) lease(ctx context.Context, key, owner string, ttl time.Duration) (bool, time.Duration, error) {
	v, err := lease.Run(ctx, s.r, []string{key}, owner, ttl.Milliseconds()).Int64()
	if err != nil {
		return false, 0, fmt.Errorf("state: lease: %w", err)
	}
	if v == 0 {
		return true, 0, nil
	}
	return false, time.Duration(v) * time.Millisecond, nil
}

// lease claims a lease: a free one is taken with one SET NX; a renewal by its holder,
// or a claim racing another holder, reads the holder first. (lua/lease.lua)
var lease = script("lease")

// hold takes a lease for owner and keeps it alive until released. When someone
// else holds it, release is nil and left says how long their lease has (at most ttl).
func (s *core) hold(ctx context.Context, key, owner string, ttl time.Duration) (release func(drop bool), left time.Duration, err error) {
	ok, left, err := s.lease(ctx, key, owner, ttl)
	if err != nil || !ok {
		return nil, left, err
	}
	return s.keepAlive(key, owner, ttl), 0, nil
}

// keepAlive renews a lease owner holds every ttl/3 until the returned function is
// called: a live holder keeps it however long its work takes, a holder that dies frees
// it within ttl. Calling the function with drop set also deletes the lease (work given
// up: the next delivery should not wait); without, the lease lapses on its own (work
// done: nothing will need it, and a round trip is saved).
func (s *core) keepAlive(key, owner string, ttl time.Duration) func(drop bool) {
	// A timer, not a goroutine, waits between renewals: a chat worker holds one lease
	// per model call in flight, thousands of them. The keeper is one allocation, its
	// timer's function and the returned stop method values of it (a lease is kept for
	// every model call and search).
	k := &keeper{s: s, key: key, owner: owner, ttl: ttl}
	k.running.Lock()
	k.timer = time.AfterFunc(ttl/3, k.renew)
	k.running.Unlock()
	return k.stop
}

// keeper is a lease KeepAlive keeps.
type keeper struct {
	s          *core
	key, owner string
	ttl        time.Duration
	stopped    atomic.Bool
	running    sync.Mutex // held by a renewal; stop waits for it
	timer      *time.Timer
	once       sync.Once
}

// renew renews the lease and sets the timer for the next renewal, unless stopped.
func (k *keeper) renew() {
	k.running.Lock()
	defer k.running.Unlock()
	if k.stopped.Load() {
		return
	}
	rctx, cancel := context.WithTimeout(context.Background(), k.ttl/3)
	k.s.lease(rctx, k.key, k.owner, k.ttl)
	cancel()
	k.timer.Reset(k.ttl / 3)
}

// stop ends the renewals, once; with drop set it deletes the lease too.
func (k *keeper) stop(drop bool) {
	k.once.Do(func() {
		k.stopped.Store(true)
		k.timer.Stop()
		// A renewal under way finishes before the lease is released, so it cannot
		// write the lease back after the release.
		k.running.Lock()
		//lint:ignore SA2001 taking the lock waits for the renewal under way; nothing is done under it
		k.running.Unlock()
		if drop {
			k.s.release(context.Background(), k.key, k.owner)
		}
	})
}

// release drops a lease held by owner.
func (s *core) release(ctx context.Context, key, owner string) error {
	return release.Run(ctx, s.r, []string{key}, owner).Err()
}

// release frees a lease held by owner; one held by another is left alone.
// (lua/release_lease.lua)
var release = script("release_lease")

// Finish moves a job that has not ended to a terminal status with fields. It reports
// whether it moved the job (see Update); a FirstWrite field that holds another value
// moves nothing (ErrAnswerStood). The chain is left as it is: no step reads
// it once the job has ended, and the archive drops it.
func (s *Jobs) Finish(ctx context.Context, id string, status Status, fields ...any) (bool, error) {
	won, _, err := s.finish(ctx, id, status, nil, fields)
	return won, err
}

// SearchStart is what a search worker reads before searching, in one round trip: a
// result stored by an earlier delivery, the job's status, and the call's lease.
type SearchStart struct {
	Done    []byte
	Status  Status
	Claimed bool
	Left    time.Duration
	// Fallback is the call's engine fallback state, nil before any (see HandOff).
	Fallback *Fallback
	// Tenant is the job's tenant, whose budget the search is paid from.
	Tenant string
}

// startSearch reads what a search worker needs before searching and claims the call's
// lease. (lua/start_search.lua)
var startSearch = script("start_search")

// StartSearch reads a call's stored result, its fallback state and its job's status
// and tenant, and claims the call's lease for owner.
func (s *Searches) StartSearch(ctx context.Context, id string, h int, call, owner string, ttl time.Duration) (*SearchStart, error) {
	keys := []string{s.K.Job(id), s.K.searchLease(id, h, call)}
	argv := []any{owner, ttl.Milliseconds(),
		callField(prefixOutcome, h, call), callField(prefixFallbackEngine, h, call), callField(prefixFallbackTried, h, call),
		resultField(h, call)}
	v, err := startSearch.Run(ctx, s.r, keys, argv...).Slice()
	if err != nil || len(v) != 6 {
		return nil, fmt.Errorf("state: starting search: %v", err)
	}
	str := func(x any) string { v, _ := x.(string); return v }
	st := &SearchStart{Status: Status(str(v[3])), Tenant: str(v[4])}
	if d, ok := v[0].(string); ok {
		st.Done = []byte(d)
	}
	if e := str(v[1]); e != "" {
		st.Fallback = &Fallback{Engine: e, Tried: []byte(str(v[2]))}
	}
	left, _ := v[5].(int64)
	st.Claimed, st.Left = left == 0, time.Duration(left)*time.Millisecond
	return st, nil
}

// setWebhookStatus moves a job's webhook status (hash field "webhook") to status if
// its current one is one of from (any, when none is given).
// (lua/set_webhook_status.lua)
var setWebhookStatus = script("set_webhook_status")

// SetWebhookStatus moves a job's webhook status to "to" if it is now one of from (any
// status when from is empty), atomically. It returns the status after the call and
// whether it changed; "" when the job record has expired.
func (s *Webhooks) SetWebhookStatus(ctx context.Context, jobID, to string, from ...string) (string, bool, error) {
	argv := make([]any, 0, 1+len(from))
	argv = append(argv, to)
	for _, f := range from {
		argv = append(argv, f)
	}
	v, err := setWebhookStatus.Run(ctx, s.r, []string{s.K.Job(jobID)}, argv...).Slice()
	if err != nil || len(v) != 2 {
		return "", false, fmt.Errorf("state: setting webhook status: %v", err)
	}
	now, _ := v[0].(string)
	changed, _ := v[1].(int64)
	return now, changed == 1, nil
}

// ClaimIdempotency binds a tenant's Idempotency-Key to a job for ttl, with a hash of
// the request it came with. The first claim wins: it gets ok; every later one gets the
// winner's job id and request hash, so the same request is answered with the same job
// and a different one under the same key can be refused.
func (s *Jobs) ClaimIdempotency(ctx context.Context, tenant, key, jobID, requestHash string, ttl time.Duration) (ok bool, existingJob, existingHash string, err error) {
	k := s.K.idempotency(tenant, key)
	won, err := s.r.SetNX(ctx, k, jobID+" "+requestHash, ttl).Result()
	if err != nil || won {
		return won, "", "", err
	}
	v, err := s.r.Get(ctx, k).Result()
	if err != nil {
		return false, "", "", err
	}
	existingJob, existingHash, _ = strings.Cut(v, " ")
	return false, existingJob, existingHash, nil
}

// ReleaseIdempotency frees a tenant's Idempotency-Key if it still names jobID with
// requestHash (a claim another request has taken since is left alone): for a key
// that shares a job only while it runs, once the job has ended.
func (s *Jobs) ReleaseIdempotency(ctx context.Context, tenant, key, jobID, requestHash string) error {
	return s.release(ctx, s.K.idempotency(tenant, key), jobID+" "+requestHash)
}

// MarkStickyConversation remembers, for ttl, that the conversation with this hash
// continues a web_search chain.
func (s *Chains) MarkStickyConversation(ctx context.Context, hash string, ttl time.Duration) error {
	return s.r.Set(ctx, s.K.stickyConversation(hash), "1", ttl).Err()
}

// stickyConversation reports whether a conversation continues a web_search chain.
func (s *Chains) StickyConversation(ctx context.Context, hash string) (bool, error) {
	n, err := s.r.Exists(ctx, s.K.stickyConversation(hash)).Result()
	return n == 1, err
}

// Lease claims key for owner for ttl: true when owner holds it, else false with the
// time the holder has left.
func (s *Leases) Lease(ctx context.Context, key, owner string, ttl time.Duration) (bool, time.Duration, error) {
	return s.core.lease(ctx, key, owner, ttl)
}

// Hold takes a lease for owner and keeps it alive until released; nil release
// with the time left when someone else holds it.
func (s *Leases) Hold(ctx context.Context, key, owner string, ttl time.Duration) (release func(drop bool), left time.Duration, err error) {
	return s.core.hold(ctx, key, owner, ttl)
}

// KeepAlive renews owner's lease every ttl/3 until the returned function is called.
func (s *Leases) KeepAlive(key, owner string, ttl time.Duration) func(drop bool) {
	return s.core.keepAlive(key, owner, ttl)
}

// Release frees owner's lease at once; one held by another is left alone.
func (s *Leases) Release(ctx context.Context, key, owner string) error {
	return s.core.release(ctx, key, owner)
}
