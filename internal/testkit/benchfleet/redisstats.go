package benchfleet

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// CommandStats is what Redis's INFO commandstats says: calls per command since the
// server started (or CONFIG RESETSTAT), keyed by the command's name as Redis writes it
// ("evalsha", "hset", "client|setname"). Commands a Lua script runs are counted under
// their own names, so an EVALSHA whose script calls HSET twice adds one "evalsha" and
// two "hset".
type CommandStats map[string]int64

// ParseCommandStats reads the text of INFO commandstats: one line a command,
// "cmdstat_<name>:calls=<n>,usec=…". Other lines (the section header, blank lines)
// are skipped; a cmdstat line without a calls count is an error.
func ParseCommandStats(info string) (CommandStats, error) {
	out := CommandStats{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		if !ok {
			continue
		}
		name, fields, ok := strings.Cut(rest, ":")
		if !ok {
			return nil, fmt.Errorf("commandstats: no fields in %q", line)
		}
		calls := int64(-1)
		for _, f := range strings.Split(fields, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("commandstats: %q: %w", line, err)
				}
				calls = n
			}
		}
		if calls < 0 {
			return nil, fmt.Errorf("commandstats: no calls in %q", line)
		}
		out[name] += calls
	}
	return out, sc.Err()
}

// ReadCommandStats reads INFO commandstats from rdb, summed over the masters of a
// Redis Cluster.
func ReadCommandStats(ctx context.Context, rdb redis.UniversalClient) (CommandStats, error) {
	read := func(ctx context.Context, c *redis.Client) (CommandStats, error) {
		s, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return nil, fmt.Errorf("INFO commandstats: %w", err)
		}
		return ParseCommandStats(s)
	}
	switch c := rdb.(type) {
	case *redis.Client:
		return read(ctx, c)
	case *redis.ClusterClient:
		var mu sync.Mutex
		out := CommandStats{}
		err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			s, err := read(ctx, m)
			mu.Lock()
			defer mu.Unlock()
			for k, v := range s {
				out[k] += v
			}
			return err
		})
		return out, err
	default:
		return nil, fmt.Errorf("commandstats: unsupported Redis client %T", rdb)
	}
}

// Delta is what happened between the readings before and s (s − before). INFO is
// left out: the readings themselves make those calls (Redis counts a reading's own
// INFO in the next one), and the fleet makes none. So are the commands a client sends
// when it opens a connection (connSetup): they are a pool's growing, not a job's.
// Commands with no calls in between are left out too.
func (s CommandStats) Delta(before CommandStats) CommandStats {
	out := CommandStats{}
	for k, v := range s {
		if d := v - before[k]; d != 0 && k != "info" && !connSetup[k] {
			out[k] = d
		}
	}
	return out
}

// connSetup are the commands go-redis sends on a new connection, by their names in
// INFO commandstats and as a client names them.
var connSetup = map[string]bool{"hello": true, "auth": true, "select": true, "client|setinfo": true, "client|setname": true, "client": true}

// Total is the sum of the calls.
func (s CommandStats) Total() int64 {
	var n int64
	for _, v := range s {
		n += v
	}
	return n
}

// Top is the n commands with the most calls, most first (ties by name).
func (s CommandStats) Top(n int) []string {
	keys := slices.Collect(maps.Keys(s))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(s[b], s[a]), strings.Compare(a, b)) })
	return keys[:min(n, len(keys))]
}

// Scripts is the number of script invocations among the calls (EVAL, EVALSHA, FCALL
// and their read-only forms): each is one command on the wire whose inner commands
// Redis counts too.
func (s CommandStats) Scripts() int64 {
	return s["eval"] + s["evalsha"] + s["eval_ro"] + s["evalsha_ro"] + s["fcall"] + s["fcall_ro"]
}

// RedisCounter is a go-redis hook that counts, on the client side, the commands a
// client sends and the round trips it makes: a command sent alone is one round trip,
// a pipeline or a MULTI/EXEC transaction is one round trip however many commands it
// carries, a script is one command (what it runs inside Redis is not seen here; INFO
// commandstats sees it). Unlike commandstats it counts only this client, so other
// users of the same Redis do not show in it. What the client sends to open a
// connection (HELLO, CLIENT SETINFO…) is not counted.
type RedisCounter struct {
	mu                   sync.Mutex
	roundTrips, commands int64
	restTrips            int64
	byName               map[string]int64
}

// RedisCounts are a RedisCounter's counts at one moment. RestTrips are the round
// trips made only of PTTLs: the key-rest lookups, which a process makes at most once a
// second per key scope (provider.Cached), whatever the number of jobs.
type RedisCounts struct {
	RoundTrips, Commands int64
	RestTrips            int64
	ByName               map[string]int64
}

// NewRedisCounter returns a counter; add it to a client with AddHook.
func NewRedisCounter() *RedisCounter { return &RedisCounter{byName: map[string]int64{}} }

// Counts returns the counts so far.
func (c *RedisCounter) Counts() RedisCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return RedisCounts{RoundTrips: c.roundTrips, Commands: c.commands, RestTrips: c.restTrips, ByName: maps.Clone(c.byName)}
}

// Sub is a − b.
func (a RedisCounts) Sub(b RedisCounts) RedisCounts {
	out := RedisCounts{RoundTrips: a.RoundTrips - b.RoundTrips, Commands: a.Commands - b.Commands, RestTrips: a.RestTrips - b.RestTrips, ByName: map[string]int64{}}
	for k, v := range a.ByName {
		if d := v - b.ByName[k]; d != 0 {
			out.ByName[k] = d
		}
	}
	return out
}

func (c *RedisCounter) count(cmds []redis.Cmder) {
	setup, rest := true, true
	for _, cmd := range cmds {
		setup = setup && connSetup[strings.ToLower(cmd.Name())]
		rest = rest && strings.EqualFold(cmd.Name(), "pttl")
	}
	if setup {
		return
	}
	c.mu.Lock()
	c.roundTrips++
	if rest {
		c.restTrips++
	}
	c.commands += int64(len(cmds))
	for _, cmd := range cmds {
		c.byName[strings.ToLower(cmd.Name())]++
	}
	c.mu.Unlock()
}

// DialHook implements redis.Hook.
func (c *RedisCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook: one command, one round trip.
func (c *RedisCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook: a pipeline, one round trip.
func (c *RedisCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 {
			c.count(cmds)
		}
		return next(ctx, cmds)
	}
}
