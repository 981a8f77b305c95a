// Package testenv gives tests the real infrastructure they run against: Redis from
// REDIS_URL (default redis://127.0.0.1:6379), with a unique key prefix per test and
// the test's keys deleted afterwards. A missing Redis fails the test; it never skips.
package testenv

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
func Redis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	opt, err := redis.ParseURL(RedisURL())
	if err != nil {
		t.Fatalf("REDIS_URL: %v", err)
	}
	rdb := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("tests need Redis at %s (set REDIS_URL): %v", RedisURL(), err)
	}
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	prefix := fmt.Sprintf("sftest:%s:%d:%d", name, time.Now().UnixNano(), seq.Add(1))
	t.Cleanup(func() {
		ctx := context.Background()
		iter := rdb.Scan(ctx, 0, prefix+":*", 500).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
		rdb.Close()
	})
	return rdb, prefix
}
