// Package testenv gives tests the real infrastructure they run against: Redis from
// REDIS_URL (default redis://127.0.0.1:6379), with a unique key prefix per test and
// the test's keys deleted afterwards. A missing Redis fails the test; it never skips.
package testenv

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/searchfleet/searchfleet/pkg/state"
)

var seq atomic.Int64

// RedisURL is REDIS_URL or the local default.
func RedisURL() string {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// Redis returns a client for the test Redis and a key prefix unique to this test.
// REDIS_URL may name a Redis Cluster (state.NewClient says how): the tests then run
// on it unchanged, which is how `make test-cluster` proves every script stays in one
// hash slot.
func Redis(t testing.TB) (redis.UniversalClient, string) {
	t.Helper()
	rdb, err := state.NewClient(RedisURL())
	if err != nil {
		t.Fatalf("REDIS_URL: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("tests need Redis at %s (set REDIS_URL): %v", RedisURL(), err)
	}
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	prefix := fmt.Sprintf("sftest:%s:%d:%d", name, time.Now().UnixNano(), seq.Add(1))
	t.Cleanup(func() {
		ctx := context.Background()
		del := func(ctx context.Context, c *redis.Client) error {
			// One DEL per key (a cluster refuses a DEL across slots), pipelined. The
			// keys of a namespaced fleet on this prefix are "<prefix>@<ns>:…".
			p := c.Pipeline()
			for _, pattern := range []string{prefix + ":*", prefix + "@*"} {
				iter := c.Scan(ctx, 0, pattern, 500).Iterator()
				for iter.Next(ctx) {
					p.Del(ctx, iter.Val())
				}
			}
			_, err := p.Exec(ctx)
			return err
		}
		if cc, ok := rdb.(*redis.ClusterClient); ok {
			cc.ForEachMaster(ctx, del)
		} else {
			del(ctx, rdb.(*redis.Client))
		}
		rdb.Close()
	})
	return rdb, prefix
}

// Keys lists the keys matching pattern on every node: a ClusterClient's SCAN reads one
// node only, so on a Redis Cluster each master is scanned.
func Keys(ctx context.Context, rdb redis.UniversalClient, pattern string) ([]string, error) {
	var mu sync.Mutex
	var keys []string
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			keys = append(keys, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		err = iter.Err()
	}
	return keys, err
}
