package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/pkg/config"
)

// Identical searches in flight on two search-worker processes are paid once within a
// tenant and separately across tenants: tenant A's jobs, sent at once, all asking
// the same slow search, cost one engine call between the two processes; tenant B's
// same search costs its own.
func TestIdenticalSearchesInFlightAcrossProcesses(t *testing.T) {
	t.Parallel()
	c := newCluster(t, func(f *config.File) {
		f.Tenants = []config.Tenant{{ID: "tenant-a", APIKeyEnv: "E2E_KEY_A"}, {ID: "tenant-b", APIKeyEnv: "E2E_KEY_B"}}
	})
	c.env = append(c.env, "E2E_KEY_A=key-a", "E2E_KEY_B=key-b")
	c.sim.SetSlowFault("/brave", 1500*time.Millisecond, 0) // every search is in flight while the others come
	c.startIngress()
	c.start("chatworker", "chatworker")
	metrics := []string{freeAddr(t), freeAddr(t)}
	for i, addr := range metrics {
		c.start(fmt.Sprintf("searchworker-%d", i+1), "searchworker", "FLEET_METRICS_ADDR="+addr)
	}
	c.eventually("both search workers serving metrics", func() bool {
		for _, addr := range metrics {
			if _, err := scrape(addr); err != nil {
				return false
			}
		}
		return true
	})

	// A round is one question: six jobs of tenant A and one of tenant B. Which
	// process takes which search is the consumer's choice; a round where one process
	// took every search of A's still proves one payment, so rounds go on (at most
	// three) until both processes took part in A's. "ok" is a paid search's outcome.
	for round := 1; ; round++ {
		before := c.sim.Stats().Requests["brave"]
		prior := searchCounts(t, metrics)
		text := fmt.Sprintf("Search the web: acme merger rumours, round %d sim:engine=brave", round)
		var ids []string
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, key := range []string{"key-a", "key-a", "key-a", "key-a", "key-a", "key-a", "key-b"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := submitAs(t, c.url, key, text)
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}()
		}
		wg.Wait()
		for _, id := range ids {
			answer(t, c.waitDone(id))
		}
		if got := c.sim.Stats().Requests["brave"] - before; got != 2 {
			t.Fatalf("round %d: the engine was called %d times for two tenants' identical searches in flight, want 2 (one per tenant)", round, got)
		}
		now := searchCounts(t, metrics)
		var paid, shared float64
		took := 0
		for i := range metrics {
			p, s := now[i]["ok"]-prior[i]["ok"], now[i]["shared"]-prior[i]["shared"]
			paid, shared = paid+p, shared+s
			if p+s > 0 {
				took++
			}
		}
		if paid != 2 || shared != 5 {
			t.Fatalf("round %d: %v paid and %v shared searches across the processes, want 2 and 5", round, paid, shared)
		}
		if took == 2 {
			return
		}
		if round == 3 {
			t.Logf("in three rounds one process took every search of tenant A's; sharing held within it")
			return
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func submitAs(t *testing.T, url, key, text string) string {
	body, _ := json.Marshal(map[string]any{"model": demo.Model, "messages": []any{map[string]any{"role": "user", "content": text}}})
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/jobs", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return ""
	}
	defer resp.Body.Close()
	var v struct {
		ID string `json:"id"`
	}
	b, _ := io.ReadAll(resp.Body)
	if json.Unmarshal(b, &v); resp.StatusCode != http.StatusAccepted || v.ID == "" {
		t.Errorf("submit: %d %s", resp.StatusCode, b)
	}
	return v.ID
}

func scrape(addr string) (string, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

var searchLine = regexp.MustCompile(`(?m)^fleet_searches_total\{engine="brave",outcome="(\w+)"\} (\S+)$`)

// searchCounts are each process's brave searches by outcome.
func searchCounts(t *testing.T, addrs []string) []map[string]float64 {
	t.Helper()
	out := make([]map[string]float64, len(addrs))
	for i, addr := range addrs {
		body, err := scrape(addr)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = map[string]float64{}
		for _, m := range searchLine.FindAllStringSubmatch(body, -1) {
			v, _ := strconv.ParseFloat(m[2], 64)
			out[i][m[1]] = v
		}
	}
	return out
}
