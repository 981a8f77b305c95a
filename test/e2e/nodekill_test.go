package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
)

// On a real NATS cluster (3 nodes, R3 streams) and a Redis Cluster (3 masters, 3
// replicas), kill -9 one NATS node and then one Redis master while jobs flow: every
// job the ingress accepted ends, and its callback is told its ending exactly once
// (one terminal webhook-id). Runs only under `make test-cluster`, which starts the
// servers (scripts/cluster.sh) and restarts what this test kills.
func TestClusterNodeKills(t *testing.T) {
	dir := os.Getenv("FLEET_TEST_CLUSTER_DIR")
	if dir == "" {
		t.Skip("needs the cluster of `make test-cluster` (FLEET_TEST_CLUSTER_DIR)")
	}
	c := newCluster(t)
	rv := newHookCounter(t)
	c.env = append(c.env, "FLEET_WEBHOOK_ALLOW=127.0.0.0/8")
	c.startIngress()
	c.start("chatworker-a", "chatworker")
	c.start("chatworker-b", "chatworker")
	c.start("searchworker-a", "searchworker")
	c.start("searchworker-b", "searchworker")

	var mu sync.Mutex
	var accepted []string
	refused := 0
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil && i < 400; i++ {
				text := fmt.Sprintf("Search the web: cluster item %d-%d? sim:slow=50ms", g, i)
				if i%3 == 0 {
					text = fmt.Sprintf("Say hello %d-%d sim:nosearch", g, i)
				}
				id, ok := c.trySubmit(text, rv.url)
				mu.Lock()
				if ok {
					accepted = append(accepted, id)
				} else {
					refused++
				}
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(accepted) }
	// Every worker is up (its consumers made) once jobs with searches complete.
	c.eventually("jobs completing", func() bool {
		mu.Lock()
		ids := append([]string(nil), accepted...)
		mu.Unlock()
		done := 0
		for _, id := range ids {
			if st, err := c.store.Jobs.JobStatus(context.Background(), id); err == nil && st.Terminal() {
				done++
			}
		}
		return done >= 30
	})

	natsNode := 1
	killPID(t, filepath.Join(dir, "nats", fmt.Sprintf("n%d.pid", natsNode)))
	t.Logf("killed NATS node n%d after %d accepted jobs", natsNode, count())
	before := count()
	c.eventually("jobs accepted with a NATS node down", func() bool { return count() >= before+40 })

	port := redisMaster(t)
	killPID(t, filepath.Join(dir, "redis", strconv.Itoa(port)+".pid"))
	t.Logf("killed the Redis master on port %d after %d accepted jobs", port, count())
	before = count()
	waitLong(t, 90*time.Second, "jobs accepted after the Redis failover", func() bool { return count() >= before+40 })
	stop()
	wg.Wait()

	// Bring the killed nodes back for the next test (the Redis node rejoins as a replica).
	restart(t, dir, "start-nats", strconv.Itoa(natsNode))
	restart(t, dir, "start-redis", strconv.Itoa(port))

	mu.Lock()
	ids := append([]string(nil), accepted...)
	mu.Unlock()
	t.Logf("%d jobs accepted, %d refused (503 while a server failed over)", len(ids), refused)
	for _, id := range ids {
		var status string
		waitLong(t, 3*time.Minute, "job "+id+" to end", func() bool {
			j, err := c.store.Jobs.GetJob(context.Background(), id)
			if err != nil || !j.Status.Terminal() {
				return false
			}
			status = string(j.Status)
			return true
		})
		waitLong(t, 2*time.Minute, "job "+id+"'s terminal webhook", func() bool { return rv.terminal(id) > 0 })
		if n := rv.terminal(id); n != 1 {
			t.Errorf("job %s: %d distinct terminal webhook-ids, want 1", id, n)
		}
		if got := rv.status(id); got != status {
			t.Errorf("job %s: webhook says %q, the record %q", id, got, status)
		}
	}
}

// submitClient bounds a submission: the ingress answers within its own timeouts.
var submitClient = &http.Client{Timeout: 30 * time.Second}

// trySubmit posts an async job with a callback; false when the fleet refused it.
func (c *cluster) trySubmit(text, callback string) (string, bool) {
	body, _ := json.Marshal(map[string]any{"model": demo.Model, "messages": []any{map[string]any{"role": "user", "content": text}},
		"callback": map[string]any{"url": callback}})
	resp, err := submitClient.Post(c.url+"/v1/jobs", "application/json", bytes.NewReader(body))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err) {
			// The ingress answers every request, refusing what it cannot take: one that
			// hangs while a server fails over is a defect, not back-pressure.
			c.t.Errorf("POST /v1/jobs got no answer within %s: %v", submitClient.Timeout, err)
		}
		return "", false
	}
	defer resp.Body.Close()
	var v struct {
		ID string `json:"id"`
	}
	json.NewDecoder(resp.Body).Decode(&v)
	return v.ID, resp.StatusCode == http.StatusAccepted && v.ID != ""
}

// hookCounter is a callback receiver that counts, per job, the distinct terminal
// webhook-ids it was sent (a redelivery keeps its id) and the status they carry.
type hookCounter struct {
	url      string
	mu       sync.Mutex
	ids      map[string]map[string]bool
	statuses map[string]string
}

func newHookCounter(t *testing.T) *hookCounter {
	rv := &hookCounter{ids: map[string]map[string]bool{}, statuses: map[string]string{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 4<<20))
		var p struct {
			Type string `json:"type"`
			Data struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"data"`
		}
		if json.Unmarshal(body, &p) == nil && strings.HasPrefix(p.Type, "job.") {
			rv.mu.Lock()
			if rv.ids[p.Data.ID] == nil {
				rv.ids[p.Data.ID] = map[string]bool{}
			}
			rv.ids[p.Data.ID][r.Header.Get("webhook-id")] = true
			rv.statuses[p.Data.ID] = p.Data.Status
			rv.mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	rv.url = "http://" + ln.Addr().String() + "/hook"
	return rv
}

func (rv *hookCounter) terminal(id string) int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return len(rv.ids[id])
}

func (rv *hookCounter) status(id string) string {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return rv.statuses[id]
}

func killPID(t *testing.T, pidFile string) {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
}

// redisMaster returns the port of a Redis Cluster master that serves slots.
func redisMaster(t *testing.T) int {
	t.Helper()
	rdb, _ := testenv.Redis(t)
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		t.Fatal("REDIS_URL does not name a Redis Cluster")
	}
	//lint:ignore SA1019 CLUSTER SLOTS names each range's master first, which is what this test kills
	slots, err := cc.ClusterSlots(context.Background()).Result()
	if err != nil || len(slots) == 0 {
		t.Fatalf("cluster slots: %v", err)
	}
	_, port, _ := net.SplitHostPort(slots[0].Nodes[0].Addr)
	p, _ := strconv.Atoi(port)
	return p
}

func restart(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("../../scripts/cluster.sh", args...)
	cmd.Env = append(os.Environ(), "CLUSTER_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cluster.sh %v: %v\n%s", args, err, out)
	}
}

func waitLong(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
