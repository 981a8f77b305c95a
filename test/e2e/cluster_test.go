// Package e2e runs the fleet as separate processes — the ingress, chatworker and
// searchworker binaries — against an embedded NATS JetStream server, the real Redis
// and the provider simulator, kills them mid-job, and drives them with the official
// OpenAI SDK.
package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/simulator"
	"github.com/searchfleet/searchfleet/pkg/state"
)

var bins string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e: skipped in -short mode")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "searchfleet-e2e-bin")
	if err != nil {
		panic(err)
	}
	cmd := exec.Command("go", "build", "-o", dir+"/", "../../cmd/ingress", "../../cmd/chatworker", "../../cmd/searchworker")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Println("e2e: building the binaries:", err)
		os.Exit(1)
	}
	bins = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cluster is a fleet of separate processes.
type cluster struct {
	t     *testing.T
	env   []string
	sim   *simulator.Server
	store *state.Store
	url   string // ingress
	// natsURL is the NATS the processes use; namespace is set on a shared cluster.
	natsURL, namespace string
	mu                 sync.Mutex
	procs              []*proc
}

type proc struct {
	name string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
	err  error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newCluster(t *testing.T, opts ...func(*config.File)) *cluster {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	// `make test-cluster` points the suite at a real NATS cluster (FLEET_TEST_NATS_URL)
	// and a Redis Cluster (REDIS_URL): each test then runs in its own namespace, with
	// R3 streams. Otherwise every test has its own embedded server.
	natsURL, shared := os.LookupEnv("FLEET_TEST_NATS_URL")
	if !shared {
		natsURL = bustest.Server(t)
	}
	sim := simulator.New(simulator.Options{})
	hs, simURL, err := sim.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close() })
	file := demo.Config(simURL, sim.EngineConfigs(simURL))
	for _, o := range opts {
		o(file)
	}
	b, _ := json.MarshalIndent(file, "", "  ")
	cfgPath := filepath.Join(t.TempDir(), "fleet.json")
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// The store reads ended jobs' records from the fleet's records bucket, as the
	// processes' own stores do.
	c := &cluster{t: t, sim: sim, store: fleettest.Store(t, rdb, prefix, natsURL, "", time.Hour), env: []string{
		"NATS_URL=" + natsURL, "REDIS_URL=" + testenv.RedisURL(), "FLEET_REDIS_PREFIX=" + prefix, "FLEET_CONFIG=" + cfgPath,
		"FLEET_ACK_WAIT=3s", "FLEET_JOB_TIMEOUT=90s", "FLEET_MODEL_TIMEOUT=20s", "FLEET_ENGINE_TIMEOUT=10s", "FLEET_DRAIN_TIMEOUT=10s",
		"FLEET_LOG_LEVEL=info", demo.KeyEnv + "=sim-key", "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
	}}
	if shared {
		c.namespace = fmt.Sprintf("t%d", time.Now().UnixNano()%1e12)
		// Every test's namespace has its own streams, R3: a small EVENTS stream and
		// records bucket keep the suite within the cluster's JetStream storage.
		c.env = append(c.env, "FLEET_NAMESPACE="+c.namespace, "FLEET_NATS_REPLICAS=3", "FLEET_EVENTS_MAX_BYTES=67108864", "FLEET_RECORDS_MAX_BYTES=67108864")
		// The processes' Redis keys are in the namespace too: read them there.
		c.store = fleettest.Store(t, rdb, state.NamespacePrefix(c.namespace, prefix), natsURL, c.namespace, time.Hour)
	}
	c.natsURL = natsURL
	c.env = append(c.env, config.UnlimitedTenantEnv()...) // load, not per-tenant limits, is under test
	t.Cleanup(func() {
		for _, p := range c.procs {
			p.cmd.Process.Kill()
			<-p.done
			if t.Failed() {
				t.Logf("--- %s output:\n%s", p.name, tail(p.out.String(), 3000))
			}
		}
	})
	return c
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// start runs a binary with the cluster's environment plus extra variables.
func (c *cluster) start(name, bin string, extra ...string) *proc {
	c.t.Helper()
	cmd := exec.Command(filepath.Join(bins, bin))
	cmd.Env = append(append([]string(nil), c.env...), extra...)
	p := &proc{name: name, cmd: cmd, out: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p
}

// startIngress runs the ingress on a free port and waits until it is ready.
func (c *cluster) startIngress() {
	c.t.Helper()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	p := c.start("ingress", "ingress", "FLEET_HTTP_ADDR="+addr)
	c.url = "http://" + addr
	c.eventually("ingress ready", func() bool {
		select {
		case <-p.done:
			c.t.Fatalf("ingress exited: %v\n%s", p.err, p.out.String())
		default:
		}
		resp, err := http.Get(c.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// workerID is the id a process names itself with in leases and traces.
func (p *proc) workerID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, p.cmd.Process.Pid)
}

// kill stops a process the hard way: no drain, nothing acknowledged.
func (p *proc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// term stops a process gracefully and returns its exit error.
func (p *proc) term(t *testing.T) error {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not stop within 20s of SIGTERM", p.name)
		return nil
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (c *cluster) eventually(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// submit posts an async job and returns its id.
func (c *cluster) submit(text string) string {
	c.t.Helper()
	return c.accepted("/v1/jobs", map[string]any{"model": demo.Model, "messages": []any{map[string]any{"role": "user", "content": text}}})
}

// accepted posts body to path, which must answer 202 with the new resource's id.
func (c *cluster) accepted(path string, body any) string {
	c.t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(c.url+path, "application/json", bytes.NewReader(b))
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		ID string `json:"id"`
	}
	json.NewDecoder(resp.Body).Decode(&v)
	if resp.StatusCode != http.StatusAccepted || v.ID == "" {
		c.t.Fatalf("POST %s: %d", path, resp.StatusCode)
	}
	return v.ID
}

// waitDone waits for a job to end and returns it.
func (c *cluster) waitDone(id string) *state.Job {
	c.t.Helper()
	var j *state.Job
	c.eventually("job "+id+" to end", func() bool {
		var err error
		j, err = c.store.Jobs.GetJob(context.Background(), id)
		return err == nil && j.Status.Terminal()
	})
	return j
}

func answer(t *testing.T, j *state.Job) string {
	t.Helper()
	if j.Status != state.Completed {
		t.Fatalf("job %s ended %s: %+v", j.ID, j.Status, j.Error)
	}
	r, err := wire.DecodeAnswer(j.Response)
	if err != nil || r.Text() == "" {
		t.Fatalf("job %s has no answer (%v): %s", j.ID, err, j.Response)
	}
	return r.Text()
}

type traceEntry struct {
	Engine string `json:"engine"`
	Worker string `json:"worker"`
	Error  string `json:"error"`
}

func traceOf(t *testing.T, j *state.Job) []traceEntry {
	var tr []traceEntry
	if err := json.Unmarshal(j.Trace, &tr); err != nil {
		t.Fatalf("trace of %s: %v", j.ID, err)
	}
	return tr
}

var _ = strings.Contains
