package fleet_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/simulator"
	"github.com/searchfleet/searchfleet/pkg/state"
	"github.com/searchfleet/searchfleet/pkg/webhook"
)

// loseBeforeFinisher is a Redis client hook that deletes an ended job's record and the
// signing secret made for it just before the finisher reads the job
// (state.Jobs.ReadEnded: the pipeline of the record's HGETALL and the deadline's
// ZREM), through another client: Redis loses the job between the chat worker's ending
// and the finisher's handling of its terminal event, as a Redis that restarted empty
// does.
type loseBeforeFinisher struct {
	rdb    redis.UniversalClient
	prefix string

	mu   sync.Mutex
	lost []string // the records deleted
}

func (*loseBeforeFinisher) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*loseBeforeFinisher) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *loseBeforeFinisher) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 2 && cmds[0].Name() == "hgetall" && cmds[1].Name() == "zrem" {
			key, _ := cmds[0].Args()[1].(string)
			if base, ok := strings.CutSuffix(key, ":job"); ok && strings.HasPrefix(key, h.prefix+":{job_") {
				h.rdb.Del(ctx, base+":whsec")
				if n, err := h.rdb.Del(ctx, key).Result(); err == nil && n == 1 {
					h.mu.Lock()
					h.lost = append(h.lost, key)
					h.mu.Unlock()
				}
			}
		}
		return next(ctx, cmds)
	}
}

func (h *loseBeforeFinisher) records() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.lost...)
}

// Redis loses a job with a callback after the chat worker ended it and before the
// finisher handles its terminal event: the finisher runs the job's hooks from the
// event's copy of the job, and its webhook is delivered once, signed with the
// tenant's secret, with the job's answer. A job whose signing secret was made for it
// lost the secret with Redis: its webhook is not sent, never signed with another.
func TestWebhookOfAJobRedisLostBeforeTheFinisher(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	hooked, err := state.NewClient(testenv.RedisURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hooked.Close() })
	lose := &loseBeforeFinisher{rdb: rdb, prefix: prefix}
	hooked.AddHook(lose)

	natsURL := bustest.Server(t)
	sim := simulator.New(simulator.Options{})
	hs, simURL, err := sim.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close() })
	env := fleettest.Settings()
	env.NATSURL, env.KeyPrefix = natsURL, prefix
	file := demo.Config(simURL, sim.EngineConfigs(simURL))
	tenantSecret := webhook.NewSecret()
	file.Tenants = append(file.Tenants, config.Tenant{ID: "acme", APIKeyEnv: "LOSTTEST_ACME_KEY", WebhookSecretEnv: "LOSTTEST_ACME_WHSEC",
		APIKeys: []string{"acme-key"}, WebhookSecret: tenantSecret},
		config.Tenant{ID: "plain", APIKeyEnv: "LOSTTEST_PLAIN_KEY", APIKeys: []string{"plain-key"}})
	if err := file.Validate(); err != nil {
		t.Fatal(err)
	}
	url, _ := fleettest.Run(t, env, file, hooked)
	f := &fleettest.Fleet{URL: url, Sim: sim, SimURL: simURL, NATS: natsURL, File: file, Env: env,
		Store: fleettest.Store(t, rdb, prefix, natsURL, env.Namespace, env.Retention)}

	rcv := newReceiver(t, func(int) int { return http.StatusOK })
	id, _ := callbackJob(t, f, "acme-key", rcv.URL)
	fleettest.Eventually(t, "the webhook", func() bool { return len(rcv.deliveries()) >= 1 })
	unsigned := newReceiver(t, func(int) int { return http.StatusOK })
	plain, jobSecret := callbackJob(t, f, "plain-key", unsigned.URL)
	if jobSecret == "" {
		t.Fatal("no secret made for the job of a tenant without one")
	}
	fleettest.Eventually(t, "both records lost", func() bool { return len(lose.records()) == 2 })
	if lost := lose.records(); !strings.Contains(lost[0], id) || !strings.Contains(lost[1], plain) {
		t.Fatalf("records lost before the finisher = %v, want the jobs'", lost)
	}
	if _, err := f.Store.Jobs.GetJob(t.Context(), id); err == nil {
		t.Fatal("Redis still knows the job")
	}
	// No second delivery follows within a few webhook retry periods (a delivery not
	// settled would be retried within them).
	time.Sleep(3 * env.WebhookSchedule[len(env.WebhookSchedule)-1])
	if ids := rcv.verify(t, tenantSecret); len(ids) != 1 || ids[0] != webhook.MessageID(id, "completed") {
		t.Fatalf("deliveries %v, want one, for the job", ids)
	}
	if n := len(unsigned.deliveries()); n != 0 {
		t.Fatalf("%d deliveries of a job whose secret Redis lost", n)
	}
	var p struct {
		Type string `json:"type"`
		Data struct {
			ID       string          `json:"id"`
			Status   string          `json:"status"`
			Response json.RawMessage `json:"response"`
		} `json:"data"`
	}
	if err := json.Unmarshal(rcv.deliveries()[0].body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Type != "job.completed" || p.Data.ID != id || p.Data.Status != "completed" || len(p.Data.Response) == 0 || string(p.Data.Response) == "null" {
		t.Fatalf("payload %+v", p)
	}
}
