package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/simulator"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// Two fleets in different namespaces on ONE NATS server and ONE Redis (and the same
// FLEET_REDIS_PREFIX) run jobs at the same time: each completes its own jobs and no
// other, their streams and consumers are disjoint (and none has the un-namespaced
// names), their events stay on their own subjects, and their Redis keys apart.
func TestNamespacedFleetsShareNATSAndRedis(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	natsURL := bustest.Server(t)
	sim := simulator.New(simulator.Options{})
	hs, simURL, err := sim.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close() })

	// A plain NATS client watches every subject: which namespace each job's events
	// travel in, and whether anything travels un-namespaced.
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	var mu sync.Mutex
	seen := map[string]map[string]bool{} // first subject token → job ids of its events
	var bare []string                    // fleet subjects without a namespace
	if _, err := nc.Subscribe(">", func(m *nats.Msg) {
		tok := strings.Split(m.Subject, ".")
		mu.Lock()
		defer mu.Unlock()
		switch {
		case tok[0] == "fleet":
			bare = append(bare, m.Subject)
		case len(tok) > 4 && tok[1] == "fleet" && tok[2] == "events":
			if seen[tok[0]] == nil {
				seen[tok[0]] = map[string]bool{}
			}
			seen[tok[0]][tok[4]] = true
		}
	}); err != nil {
		t.Fatal(err)
	}
	nc.Flush()

	namespaces := []string{"alpha", "beta"}
	fleets := map[string]*fleettest.Fleet{}
	for _, ns := range namespaces {
		env := fleettest.Settings()
		env.NATSURL, env.KeyPrefix, env.Namespace = natsURL, prefix, ns
		file := demo.Config(simURL, sim.EngineConfigs(simURL))
		url, _ := fleettest.Run(t, env, file, rdb)
		fleets[ns] = &fleettest.Fleet{URL: url, Store: fleettest.Store(t, rdb, state.NamespacePrefix(ns, prefix), natsURL, ns, time.Hour)}
	}

	// Both fleets take jobs at once.
	const perFleet = 4
	ids := map[string][]string{}
	var wg sync.WaitGroup
	for _, ns := range namespaces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perFleet {
				status, body, _ := fleets[ns].Do(t, "POST", "/v1/jobs", map[string]any{
					"model": demo.Model, "messages": []any{map[string]any{"role": "user", "content": "Find the latest news about AI"}},
				})
				var job struct{ ID string }
				json.Unmarshal(body, &job)
				if status != http.StatusAccepted || job.ID == "" {
					t.Errorf("%s: status %d: %s", ns, status, body)
					return
				}
				mu.Lock()
				ids[ns] = append(ids[ns], job.ID)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	for i, ns := range namespaces {
		f, other := fleets[ns], fleets[namespaces[1-i]]
		for _, id := range ids[ns] {
			fleettest.Eventually(t, ns+" job "+id+" completed", func() bool {
				_, b, _ := f.Do(t, "GET", "/v1/jobs/"+id, nil)
				var got struct{ Status string }
				json.Unmarshal(b, &got)
				return got.Status == "completed"
			})
			// The other fleet knows nothing of it: not its API, not its keys.
			if status, body, _ := other.Do(t, "GET", "/v1/jobs/"+id, nil); status != http.StatusNotFound {
				t.Errorf("job %s of %s seen by the other fleet: %d %s", id, ns, status, body)
			}
			if _, err := other.Store.Jobs.GetJob(t.Context(), id); !errors.Is(err, state.ErrNotFound) {
				t.Errorf("job %s of %s is in the other namespace's keys: %v", id, ns, err)
			}
		}
	}

	// Streams and consumers: each fleet has its own, and nobody the bare names.
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	streams := map[string][]string{}
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		// A key-value bucket's stream is KV_<bucket>, its subjects $KV.<bucket>.>: the
		// namespace is the bucket's.
		bucket, isKV := strings.CutPrefix(name, "KV_")
		ns, _, ok := strings.Cut(bucket, "-")
		if !ok || (ns != "alpha" && ns != "beta") {
			t.Errorf("stream %q is in no namespace", name)
			continue
		}
		subjectPrefix := ns + "."
		if isKV {
			subjectPrefix = "$KV." + ns + "-"
		} else {
			streams[ns] = append(streams[ns], name)
		}
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, subj := range s.CachedInfo().Config.Subjects {
			if !strings.HasPrefix(subj, subjectPrefix) {
				t.Errorf("stream %s takes subject %q of another namespace", name, subj)
			}
		}
		for c := range s.ListConsumers(ctx).Info() {
			if !strings.HasPrefix(c.Name, ns+"-") {
				t.Errorf("stream %s has consumer %q of another namespace", name, c.Name)
			}
		}
	}
	if names.Err() != nil {
		t.Fatal(names.Err())
	}
	for _, ns := range namespaces {
		if len(streams[ns]) != 6 {
			t.Errorf("namespace %s has streams %v, want the fleet's 6", ns, streams[ns])
		}
	}

	mu.Lock()
	defer mu.Unlock()
	if len(bare) > 0 {
		t.Errorf("un-namespaced subjects used: %v", bare[:min(len(bare), 5)])
	}
	for i, ns := range namespaces {
		for _, id := range ids[ns] {
			if !seen[ns][id] {
				t.Errorf("no event of %s job %s on %s subjects", ns, id, ns)
			}
			if seen[namespaces[1-i]][id] {
				t.Errorf("an event of %s job %s crossed into %s", ns, id, namespaces[1-i])
			}
		}
	}
}
