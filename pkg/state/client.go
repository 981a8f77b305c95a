package state

import (
	"context"
	"fmt"
	neturl "net/url"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"

	"github.com/searchfleet/searchfleet/internal/redact"
)

// Client is a connection to Redis. Wiring code holds one to hand to New; only this
// package sends it commands.
type Client = redis.UniversalClient

// Dial connects to the Redis at url and waits until it answers, retrying for at most
// wait (0: one attempt) or until ctx ends. A url naming one host (redis://host:port/db)
// is a standalone server; a Redis Cluster is named by the scheme redis+cluster://
// (rediss+cluster:// with TLS) or by several hosts (redis://h1:p1,h2:p2 or go-redis's
// ?addr=h2:p2 form), and gets go-redis's cluster client, which follows slots and
// failovers. Every key a script or a transaction touches together shares a {hash tag}
// (keys.go), so the fleet runs unchanged on either.
func Dial(ctx context.Context, url string, wait time.Duration) (Client, error) {
	rdb, err := NewClient(url)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for {
		pctx, cancel := context.WithTimeout(ctx, min(2*time.Second, max(wait, 500*time.Millisecond)))
		err := rdb.Ping(pctx).Err()
		cancel()
		if err == nil {
			return rdb, nil
		}
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			rdb.Close()
			return nil, fmt.Errorf("redis %s not reachable: %w", redact.URL(url), err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// NewClient returns a client for url (see Dial) without contacting the server.
func NewClient(url string) (Client, error) {
	curl, cluster := clusterURL(url)
	if !cluster {
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		opt.PoolSize = 256
		return redis.NewClient(opt), nil
	}
	if u, err := neturl.Parse(curl); err == nil && u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("REDIS_URL: a Redis Cluster has only database 0; drop %q", u.Path)
	}
	opt, err := redis.ParseClusterURL(curl)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	opt.PoolSize = 256
	return redis.NewClusterClient(opt), nil
}

// clusterURL reports whether url names a Redis Cluster, and rewrites it in the form
// redis.ParseClusterURL reads (one host, the others as addr= parameters).
func clusterURL(url string) (string, bool) {
	scheme, rest, ok := strings.Cut(url, "://")
	if !ok {
		return url, false
	}
	cluster := false
	if base, found := strings.CutSuffix(scheme, "+cluster"); found {
		scheme, cluster = base, true
	}
	auth, hostsAndPath := "", rest
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		auth, hostsAndPath = rest[:i+1], rest[i+1:]
	}
	hosts, tail := hostsAndPath, ""
	if i := strings.IndexAny(hostsAndPath, "/?"); i >= 0 {
		hosts, tail = hostsAndPath[:i], hostsAndPath[i:]
	}
	list := strings.Split(hosts, ",")
	if len(list) > 1 {
		cluster = true
	}
	if strings.Contains(tail, "addr=") {
		cluster = true
	}
	if !cluster {
		return url, false
	}
	path, query, _ := strings.Cut(tail, "?")
	params := []string{}
	if query != "" {
		params = append(params, query)
	}
	for _, h := range list[1:] {
		params = append(params, "addr="+h)
	}
	out := scheme + "://" + auth + list[0]
	if path != "" && path != "/" && path != "/0" {
		// A cluster has only database 0: keep the path for NewClient to refuse.
		out += path
	}
	if len(params) > 0 {
		out += "?" + strings.Join(params, "&")
	}
	return out, true
}

// Persist runs write until it succeeds, backing off from 100 ms, for at most within
// (or until ctx ends). It is for the writes that record something already paid for (a
// model's answer, a search result): worth riding out a Redis restart, because the
// redelivery that would follow a failure would pay again.
func Persist(ctx context.Context, within time.Duration, write func() error) error {
	policy := backoff.NewExponentialBackOff()
	policy.InitialInterval, policy.MaxElapsedTime = 100*time.Millisecond, within
	return backoff.Retry(write, backoff.WithContext(policy, ctx))
}
