package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/simulator"
	"github.com/searchfleet/searchfleet/pkg/webhook"
)

// The tenant every submission belongs to: with a tenant signing secret, every
// callback is signed with a key the receiver knows, including those of jobs whose
// 202 answer (which would carry a per-job secret) was lost with a killed ingress.
const (
	tenantKeyEnv    = "CHAOS_API_KEY"
	tenantSecretEnv = "CHAOS_WEBHOOK_SECRET"
	apiKey          = "chaos-key"
)

// rig is one scenario's world: its own nats-server and redis-server on loopback ports
// with their data in the scenario's directory, the simulator, the webhook receiver,
// and the fleet's processes — two ingress replicas behind a load balancer, two chat
// workers, two search workers.
type rig struct {
	dir      string
	bins     Binaries
	opts     Options
	secret   string
	logf     func(format string, args ...any)
	natsPort int
	natsDir  string
	redisDir string

	redisPort             int
	nats, redis           *Proc
	ingress, chat, search []*Proc
	ingressPorts          []int
	lb                    *balancer
	sim                   *simulator.Server
	rec                   *recorder
	simSrv                *httptest.Server
	recv                  *receiver
	recvURL, url          string

	// phaseStart is when the submissions began.
	phaseStart time.Time

	mu        sync.Mutex
	incidents []incident
	redisGen  int
}

// incident is one thing the harness did to the fleet.
type incident struct {
	at     time.Time
	kind   string // kill, restart, wipe, down, up
	role   string // ingress, chat, search, nats, redis, receiver
	target string // the process's name
}

func (r *rig) note(kind, role, target string) {
	r.mu.Lock()
	r.incidents = append(r.incidents, incident{at: time.Now(), kind: kind, role: role, target: target})
	r.mu.Unlock()
}

func (r *rig) timeline() []incident {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.incidents)
}

func startRig(ctx context.Context, dir string, bins Binaries, o Options, logf func(string, ...any)) (*rig, error) {
	r := &rig{dir: dir, bins: bins, opts: o, secret: webhook.NewSecret(), logf: logf}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return r, err
	}
	var err error
	for _, p := range []*int{&r.natsPort, &r.redisPort} {
		if *p, err = freePort(); err != nil {
			return r, err
		}
	}

	// NATS JetStream, every write synced before it is acknowledged.
	r.natsDir = filepath.Join(dir, "nats")
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, []byte("jetstream {\n  sync_interval: always\n}\n"), 0o644); err != nil {
		return r, err
	}
	if r.nats, err = NewProc(dir, "nats-server", bins.NATSServer,
		[]string{"-c", conf, "-js", "-sd", r.natsDir, "-a", "127.0.0.1", "-p", strconv.Itoa(r.natsPort)}, nil); err != nil {
		return r, err
	}
	if err := r.startNATS(ctx); err != nil {
		return r, err
	}
	// Redis as the deployment configs ship it: append-only file, fsync on every write.
	r.redisDir = filepath.Join(dir, "redis-0")
	if err := r.newRedis(ctx); err != nil {
		return r, err
	}

	// The simulator at realistic latency, behind the recorder, over HTTPS and HTTP/2
	// as real providers are; the processes trust its throwaway certificate through
	// SSL_CERT_FILE.
	r.sim = simulator.New(simulator.Options{ModelLatency: o.ModelLatency, EngineLatency: o.EngineLatency})
	r.rec = &recorder{sim: r.sim, jitter: o.ModelLatency / 2}
	caFile := filepath.Join(dir, "sim-ca.pem")
	if r.simSrv, err = ServeTLS(r.rec, caFile); err != nil {
		return r, err
	}
	simURL := r.simSrv.URL

	recvPort, err := freePort()
	if err != nil {
		return r, err
	}
	if r.recv, err = newReceiver(r.secret, hostPort(recvPort)); err != nil {
		return r, err
	}
	if err := r.recv.up(); err != nil {
		return r, err
	}
	r.recvURL = "http://" + hostPort(recvPort) + "/hook"

	file := demo.Config(simURL, r.sim.EngineConfigs(simURL))
	file.Tenants = []config.Tenant{{ID: "chaos", APIKeyEnv: tenantKeyEnv, WebhookSecretEnv: tenantSecretEnv}}
	if err := file.Validate(); err != nil {
		return r, err
	}
	b, _ := json.MarshalIndent(file, "", "  ")
	cfg := filepath.Join(dir, "fleet.json")
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		return r, err
	}
	schedule := make([]string, len(o.WebhookSchedule))
	for i, d := range o.WebhookSchedule {
		schedule[i] = d.String()
	}
	env := []string{
		"NATS_URL=nats://" + hostPort(r.natsPort), "REDIS_URL=redis://" + hostPort(r.redisPort) + "/0", "FLEET_CONFIG=" + cfg,
		"FLEET_ACK_WAIT=" + o.AckWait.String(), "FLEET_JOB_TIMEOUT=" + o.JobTimeout.String(), "FLEET_RESEARCH_TIMEOUT=" + o.JobTimeout.String(),
		"FLEET_MODEL_TIMEOUT=20s", "FLEET_ENGINE_TIMEOUT=15s", "FLEET_DRAIN_TIMEOUT=5s",
		"FLEET_WEBHOOK_SCHEDULE=" + strings.Join(schedule, ","), "FLEET_WEBHOOK_ALLOW=127.0.0.0/8", "FLEET_WEBHOOK_TIMEOUT=5s",
		"FLEET_CHAT_CONCURRENCY=64", "FLEET_SEARCH_CONCURRENCY=32", "FLEET_LOG_LEVEL=info", "FLEET_DATA_DIR=" + filepath.Join(dir, "data"),
		demo.KeyEnv + "=sim-key", tenantKeyEnv + "=" + apiKey, tenantSecretEnv + "=" + r.secret,
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "SSL_CERT_FILE=" + caFile,
	}
	env = append(env, config.UnlimitedTenantEnv()...) // the suite measures the fleet, not its per-tenant limits
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv) // tracing, when the run is started with it (make chaos with OTEL_*)
		}
	}
	for i := range max(1, o.IngressReplicas) {
		port, err := freePort()
		if err != nil {
			return r, err
		}
		p, err := NewProc(dir, fmt.Sprintf("ingress-%d", i), bins.Ingress, nil, append(env[:len(env):len(env)], "FLEET_HTTP_ADDR="+hostPort(port)))
		if err != nil {
			return r, err
		}
		r.ingress, r.ingressPorts = append(r.ingress, p), append(r.ingressPorts, port)
	}
	if r.lb, err = startBalancer(r.ingress, r.ingressPorts); err != nil {
		return r, err
	}
	r.url = r.lb.url
	for i := range 2 {
		c, err := NewProc(dir, fmt.Sprintf("chatworker-%d", i), bins.ChatWorker, nil, env)
		if err != nil {
			return r, err
		}
		s, err := NewProc(dir, fmt.Sprintf("searchworker-%d", i), bins.SearchWorker, nil, env)
		if err != nil {
			return r, err
		}
		r.chat, r.search = append(r.chat, c), append(r.search, s)
	}
	for _, p := range r.fleet() {
		if err := p.Start(); err != nil {
			return r, err
		}
	}
	return r, r.waitReady(ctx, 30*time.Second)
}

// fleet lists the fleet's processes (not the servers).
func (r *rig) fleet() []*Proc {
	return slices.Concat(r.ingress, r.chat, r.search)
}

// waitReady waits until every ingress replica answers /readyz with 200.
func (r *rig) waitReady(ctx context.Context, within time.Duration) error {
	for i := range r.ingress {
		if err := r.waitIngress(ctx, i, within); err != nil {
			return err
		}
	}
	return nil
}

// waitIngress waits until ingress replica i answers /readyz with 200.
func (r *rig) waitIngress(ctx context.Context, i int, within time.Duration) error {
	deadline := time.Now().Add(within)
	p := r.ingress[i]
	for {
		resp, err := http.Get("http://" + hostPort(r.ingressPorts[i]) + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !p.Running() {
			return fmt.Errorf("%s exited (see %s)", p.Name, p.LogFile)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s (see %s)", p.Name, within, p.LogFile)
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}

func (r *rig) startNATS(ctx context.Context) error {
	if err := r.nats.Start(); err != nil {
		return err
	}
	return waitTCP(ctx, r.natsPort, 15*time.Second)
}

// newRedis starts redis-server on r.redisDir, which it creates if missing.
func (r *rig) newRedis(ctx context.Context) error {
	if err := os.MkdirAll(r.redisDir, 0o755); err != nil {
		return err
	}
	p, err := NewProc(r.dir, "redis-server", r.bins.RedisServer, []string{
		"--bind", "127.0.0.1", "--port", strconv.Itoa(r.redisPort), "--dir", r.redisDir,
		"--appendonly", "yes", "--appendfsync", "always", "--save", "", "--protected-mode", "no", "--daemonize", "no",
	}, nil)
	if err != nil {
		return err
	}
	r.redis = p
	if err := p.Start(); err != nil {
		return err
	}
	return r.pingRedis(ctx, 15*time.Second)
}

func (r *rig) pingRedis(ctx context.Context, within time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: hostPort(r.redisPort)})
	defer c.Close()
	return Poll(ctx, within, 50*time.Millisecond, func() error {
		if err := c.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("redis on %d not answering after %s: %w", r.redisPort, within, err)
		}
		return nil
	})
}

// killRestart kills p (SIGKILL), waits pause, and starts it again.
func (r *rig) killRestart(ctx context.Context, role string, p *Proc, pause time.Duration) {
	p.Kill()
	r.note("kill", role, p.Name)
	sleep(ctx, pause)
	if err := p.Start(); err != nil {
		r.logf("restarting %s: %v", p.Name, err)
		return
	}
	r.note("restart", role, p.Name)
}

// restartNATS kills nats-server with SIGKILL and starts it again on the same store.
func (r *rig) restartNATS(ctx context.Context, pause time.Duration) {
	r.nats.Kill()
	r.note("kill", "nats", "nats-server")
	sleep(ctx, pause)
	if err := r.startNATS(ctx); err != nil {
		r.logf("restarting nats-server: %v", err)
	}
	r.note("restart", "nats", "nats-server")
}

// restartRedis kills redis-server with SIGKILL and starts it again: on its own data
// (appendfsync always), or, with empty, on a new empty directory.
func (r *rig) restartRedis(ctx context.Context, pause time.Duration, empty bool) {
	r.redis.Kill()
	r.note("kill", "redis", "redis-server")
	if empty {
		r.redisGen++
		r.redisDir = filepath.Join(r.dir, "redis-"+strconv.Itoa(r.redisGen))
		r.note("wipe", "redis", "redis-server")
	}
	sleep(ctx, pause)
	if err := r.newRedis(ctx); err != nil {
		r.logf("restarting redis-server: %v", err)
	}
	r.note("restart", "redis", "redis-server")
}

// ensureUp starts every fleet process that is not running.
func (r *rig) ensureUp() {
	for _, p := range r.fleet() {
		if !p.Running() {
			p.Start()
		}
	}
}

// stop ends everything the rig started.
func (r *rig) stop() {
	var wg sync.WaitGroup
	for _, p := range r.fleet() {
		if p != nil {
			wg.Add(1)
			go func() { defer wg.Done(); p.Kill() }()
		}
	}
	wg.Wait()
	if r.nats != nil {
		r.nats.Term(5 * time.Second)
	}
	if r.redis != nil {
		r.redis.Kill()
	}
	if r.recv != nil {
		r.recv.down()
	}
	if r.simSrv != nil {
		r.simSrv.Close()
	}
	if r.lb != nil {
		r.lb.srv.Close()
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
