package benchfleet

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisCost is the Redis traffic of a measured span, seen from both ends: what the
// server counted (INFO commandstats: every client of that Redis, the commands Lua
// scripts run included) and what the measured client sent (its hook: commands, with a
// script counted once, and round trips).
type RedisCost struct {
	Server  CommandStats
	Client  RedisCounts
	Elapsed time.Duration
}

// RedisMeter reads a Redis server's command counts (through stats, a client of its
// own so the readings are not counted as the measured client's) and a client's
// counter.
type RedisMeter struct {
	Stats   redis.UniversalClient
	Counter *RedisCounter
}

// Start takes the first reading; the function it returns takes the second and gives
// the difference.
func (m RedisMeter) Start(ctx context.Context) (stop func(context.Context) (RedisCost, error), err error) {
	s0, err := ReadCommandStats(ctx, m.Stats)
	if err != nil {
		return nil, err
	}
	c0, t0 := m.Counter.Counts(), time.Now()
	return func(ctx context.Context) (RedisCost, error) {
		c1, t1 := m.Counter.Counts(), time.Now()
		s1, err := ReadCommandStats(ctx, m.Stats)
		if err != nil {
			return RedisCost{}, err
		}
		return RedisCost{Server: s1.Delta(s0), Client: c1.Sub(c0), Elapsed: t1.Sub(t0)}, nil
	}, nil
}

// Idle reads the traffic of a window d in which the caller sends no job.
func (m RedisMeter) Idle(ctx context.Context, d time.Duration) (RedisCost, error) {
	stop, err := m.Start(ctx)
	if err != nil {
		return RedisCost{}, err
	}
	time.Sleep(d)
	return stop(ctx)
}

// Quiet waits until the counter has not moved for quiet (at most max), and says
// whether it got there.
func (m RedisMeter) Quiet(ctx context.Context, quiet, max time.Duration) bool {
	deadline := time.Now().Add(max)
	last, since := m.Counter.Counts().Commands, time.Now()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
		if n := m.Counter.Counts().Commands; n != last {
			last, since = n, time.Now()
		} else if time.Since(since) >= quiet {
			return true
		}
	}
	return false
}

// JobCost is the Redis cost of one job measured alone.
type JobCost struct {
	// Job is from just before the job was sent until its client's Redis traffic had
	// been quiet for the settle time after the answer (the steps after the answer,
	// such as the finisher's, included).
	Job RedisCost
	// Background is the same readings over an idle window of the settle time just
	// before: what the idle fleet and any other client of the Redis did.
	Background RedisCost
}

// MeasureAlone measures what one job costs in Redis: it waits for the measured
// client to fall quiet, reads an idle window of settle as the background, then runs
// job and reads until the client has been quiet for settle again.
func MeasureAlone(ctx context.Context, m RedisMeter, settle time.Duration, job func() error) (JobCost, error) {
	var out JobCost
	if !m.Quiet(ctx, settle, 10*settle+5*time.Second) {
		return out, fmt.Errorf("the Redis client never fell quiet for %s before the job", settle)
	}
	var err error
	if out.Background, err = m.Idle(ctx, settle); err != nil {
		return out, err
	}
	stop, err := m.Start(ctx)
	if err != nil {
		return out, err
	}
	if err := job(); err != nil {
		return out, err
	}
	if !m.Quiet(ctx, settle, 10*settle+5*time.Second) {
		return out, fmt.Errorf("the Redis client never fell quiet for %s after the job", settle)
	}
	out.Job, err = stop(ctx)
	return out, err
}

// FormatTop writes the n commands with the most calls as "name n, …", each divided
// by per (jobs).
func FormatTop(s CommandStats, n int, per float64) string {
	var parts []string
	for _, k := range s.Top(n) {
		parts = append(parts, fmt.Sprintf("%s %.3g", k, float64(s[k])/per))
	}
	return strings.Join(parts, ", ")
}

// LoadAvg is the machine's load averages (1, 5, 15 min) from /proc/loadavg, or "?".
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// Allocs is how many heap objects and bytes this process has allocated so far
// (runtime.MemStats: Mallocs and TotalAlloc), for allocations per job.
func Allocs() (objects, bytes uint64) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs, m.TotalAlloc
}

// ProcessCPU is the CPU time (user + system) this process has used: the fleet, its
// NATS server, the simulator and the load generator together when they run in it
// (Labeled splits them in a CPU profile).
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
