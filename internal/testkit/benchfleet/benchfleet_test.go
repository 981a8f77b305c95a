package benchfleet

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/fleet"
)

func TestParseCommandStats(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_evalsha:calls=12,usec=340,usec_per_call=28.33,rejected_calls=0,failed_calls=1\r\n" +
		"cmdstat_hset:calls=30,usec=60,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_client|setname:calls=2,usec=1,usec_per_call=0.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=7,usec=700,usec_per_call=100.00,rejected_calls=0,failed_calls=0\r\n\r\n"
	s, err := ParseCommandStats(info)
	if err != nil {
		t.Fatal(err)
	}
	want := CommandStats{"evalsha": 12, "hset": 30, "client|setname": 2, "info": 7}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Fatalf("parsed %v, want %v", s, want)
	}
	if s.Total() != 51 || s.Scripts() != 12 {
		t.Errorf("total %d scripts %d, want 51 and 12", s.Total(), s.Scripts())
	}
	after := CommandStats{"evalsha": 15, "hset": 36, "client|setname": 2, "info": 9, "pexpire": 3}
	d := after.Delta(s)
	if want := (CommandStats{"evalsha": 3, "hset": 6, "pexpire": 3}); fmt.Sprint(d) != fmt.Sprint(want) {
		t.Errorf("delta %v, want %v (INFO left out, unchanged commands left out)", d, want)
	}
	if top := d.Top(2); fmt.Sprint(top) != "[hset evalsha]" {
		t.Errorf("top %v, want [hset evalsha] (ties by name)", top)
	}
	for _, bad := range []string{"cmdstat_get\r\n", "cmdstat_get:usec=3\r\n", "cmdstat_get:calls=x,usec=3\r\n"} {
		if _, err := ParseCommandStats(bad); err == nil {
			t.Errorf("%q parsed without an error", bad)
		}
	}
}

// The floor's streams and consumers are the fleet's, renamed.
func TestFloorUsesTheFleetsStreamSettings(t *testing.T) {
	var jobs jetstream.StreamConfig
	for _, s := range bus.Streams(bus.Limits{}) {
		if s.Name == bus.StreamJobs {
			jobs = s
		}
	}
	streams, consumers := FloorStreams(FloorOptions{Hops: 3}), FloorConsumers(FloorOptions{Hops: 3})
	if len(streams) != 3 || len(consumers) != 3 {
		t.Fatalf("%d streams, %d consumers for 3 hops", len(streams), len(consumers))
	}
	chat := bus.ChatConsumer(bus.DefaultTiming[bus.ConsumerChat]).Config
	for i, s := range streams {
		if s.Retention != jetstream.WorkQueuePolicy || s.Storage != jetstream.FileStorage || s.Retention != jobs.Retention ||
			s.Discard != jobs.Discard || s.Duplicates != jobs.Duplicates || s.MaxMsgs != jobs.MaxMsgs || s.Replicas != jobs.Replicas {
			t.Errorf("stream %s = %+v, want the settings of JOBS %+v", s.Name, s, jobs)
		}
		c := consumers[i]
		if c.AckPolicy != jetstream.AckExplicitPolicy || c.AckWait != chat.AckWait || c.MaxDeliver != chat.MaxDeliver ||
			c.MaxAckPending != chat.MaxAckPending || c.FilterSubject != s.Subjects[0] {
			t.Errorf("consumer %s = %+v, want the chat consumer's settings on %s", c.Durable, c, s.Subjects[0])
		}
	}
	if FloorStreams(FloorOptions{Memory: true})[0].Storage != jetstream.MemoryStorage {
		t.Error("Memory does not keep the floor's streams in memory")
	}
}

// Twenty floor jobs go through every hop, make exactly their round trips, and show
// in INFO commandstats.
func TestFloorRunsJobsAndCountsRedis(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := StartFloor(ctx, FloorOptions{Hops: 5, RoundTrips: 2, Concurrency: 8})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			f.Stop()
		}
	}()
	stats, _ := testenv.Redis(t)
	meter := RedisMeter{Stats: stats, Counter: f.Counter}
	stop, err := meter.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res := ClosedLoop(ctx, func() (time.Duration, error) { return f.Job(ctx) }, 4, 30*time.Second, 20)
	cost, err := stop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || len(res.Latencies) != 20 || res.Rate() <= 0 {
		t.Fatalf("%d jobs, %d errors (%v), rate %.1f; want 20 jobs, none failed, a positive rate", len(res.Latencies), res.Errors, res.FirstErr, res.Rate())
	}
	const roundTrips = 20 * 5 * 2
	if cost.Client.RoundTrips != roundTrips || cost.Client.Commands != roundTrips || cost.Client.ByName["evalsha"] != roundTrips {
		t.Errorf("client counted %d round trips, %d commands, %d EVALSHA; want %d each", cost.Client.RoundTrips, cost.Client.Commands, cost.Client.ByName["evalsha"], roundTrips)
	}
	// The server counts every client of this Redis (other tests share it), so its
	// counts are at least the floor's: the EVALSHA and the two commands each runs.
	for _, name := range []string{"evalsha", "hset", "pexpire"} {
		if cost.Server[name] < roundTrips {
			t.Errorf("INFO commandstats counted %d %s, want at least %d", cost.Server[name], name, roundTrips)
		}
	}
	if cost.Server.Total() < roundTrips*FloorCommandsPerRoundTrip {
		t.Errorf("INFO commandstats counted %d commands, want at least %d", cost.Server.Total(), roundTrips*FloorCommandsPerRoundTrip)
	}
	// Every job's hash holds one field a round trip; Stop deletes them.
	keys, err := f.Redis.Keys(ctx, f.prefix+":*").Result()
	if err != nil || len(keys) != 20 {
		t.Fatalf("%d job hashes (%v), want 20", len(keys), err)
	}
	if n, _ := f.Redis.HLen(ctx, keys[0]).Result(); n != 5*2 {
		t.Errorf("job hash %s has %d fields, want 10", keys[0], n)
	}
	f.Stop()
	stopped = true
	if n, _ := stats.Keys(ctx, f.prefix+":*").Result(); len(n) != 0 {
		t.Errorf("%d floor keys left after Stop", len(n))
	}
}

// One fleet job measured alone: the fleet's client made round trips, and Redis
// counted at least the commands the client sent (the scripts' own add to them).
func TestOneFleetJobMeasuredAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole fleet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	hc := &http.Client{Transport: fleet.Transport(), Timeout: 30 * time.Second}
	meter := RedisMeter{Stats: f.Stats, Counter: f.Counter}
	c, err := MeasureAlone(ctx, meter, 200*time.Millisecond, func() error {
		_, err := (&Client{Base: f.URL, HTTP: hc}).Ask(ctx, "Search the web: what is new today? sim:engine=brave")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Job.Client.RoundTrips < 2 || c.Job.Client.Commands < c.Job.Client.RoundTrips {
		t.Errorf("the fleet's client made %d round trips with %d commands for a one-search job", c.Job.Client.RoundTrips, c.Job.Client.Commands)
	}
	if c.Job.Server.Total() < c.Job.Client.Commands || c.Job.Server["evalsha"]+c.Job.Server["eval"] < c.Job.Client.ByName["evalsha"] {
		t.Errorf("Redis counted %d commands (%d scripts) but the client sent %d (%v)", c.Job.Server.Total(), c.Job.Server.Scripts(), c.Job.Client.Commands, c.Job.Client.ByName)
	}
	if !strings.Contains(FormatTop(c.Job.Server, 3, 1), " ") {
		t.Errorf("FormatTop wrote %q", FormatTop(c.Job.Server, 3, 1))
	}
}

// The fleet runs with its streams in memory (fleetbench -memory) as it does on disk,
// with the event stream's bound of the fleet's configuration (4 GiB by default, which
// memory cannot reserve) brought within the embedded server's memory.
func TestFleetRunsWithStreamsInMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole fleet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := Start(ctx, Options{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	hc := &http.Client{Transport: fleet.Transport(), Timeout: 30 * time.Second}
	if _, err := (&Client{Base: f.URL, HTTP: hc}).Ask(ctx, "Search the web: what is new today? sim:engine=brave"); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(f.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{bus.StreamJobs, bus.StreamEvents} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if c := s.CachedInfo().Config; c.Storage != jetstream.MemoryStorage || (name == bus.StreamEvents && c.MaxBytes > 1<<30) {
			t.Errorf("%s: %s storage, at most %d bytes", name, c.Storage, c.MaxBytes)
		}
	}
}

// What a one-search job may cost in Redis, counted on the server (the commands Lua
// scripts run included) and on the fleet's client (round trips): 44 and 15, with
// nothing to spare. Apart from them, the key-rest lookups (one PTTL round trip per
// key scope, model and engine, when the process's one-second cache has lapsed: on a
// loaded machine a lone job's window always holds them) are bounded by
// oneSearchJobRestLookups. A job whose window holds more — the tenant index's trim
// (one submission in 16), a reaper sweep — is not the one measured
// (TestOneSearchJobRedisBudget takes the best of up to five). Where they go (a job's
// chain, its calls' outcomes, recorded results and spend ledger are fields of its one
// hash; docs/benchmarks.md, "Redis commands per job"):
//
//	ingress: create the job: deadline, HSET, PEXPIRE, tenant index (a fresh id: no
//	  script looks for an earlier record; state.Store.CreateJob)                     4
//	hop 0: read the job (HGETALL), take the hop's lease (SET NX)                     2
//	hop 0: store the turn with its calls, flags, running (script: HMGET, HSET)       3
//	search: outcome, fallback, status and lease (script: HMGET, SET NX)              3
//	search: the price held against the job's cap (script: HMGET, HSET)              3
//	search: and against the tenant's day and month (script: 2 HMGET, 2 HSET)        5
//	search: claim the tenant's search among identical ones in flight (SET NX;
//	  pkg/search inflight.go)                                                        1
//	search: free that claim once the outcome is stored (script: GET, DEL)           3
//	search: read the job's batch (HGET), store the outcome as the chain's result,
//	  counted, with the recorded result (script: HMGET, HSET)                        4
//	resume: read the job back with the result the search worker stored (nothing
//	  written), take hop 1's lease (script: HGETALL, SET NX)                         3
//	end: the final turn and the status compare-and-set (script: HMGET, HSET)        3
//	ingress: read the ended job to answer (HMGET)                                    1
//	finisher: read the job (HGETALL), forget its deadline (ZREM)                     2
//	archive: trim and count spend per model, once (script: HGETALL, DEL, HSET with
//	  the summary, PEXPIRE, and cost, job and searches raised by one HMGET and one
//	  HSET; a count of 0 is not written)                                             7
const (
	oneSearchJobCommands    = 44
	oneSearchJobRoundTrips  = 15
	oneSearchJobRestLookups = 2
)

// A one-search job stays within its Redis budget. The server-side count is read from
// MONITOR, keeping the commands that name a key of this fleet's prefix (other tests
// share the Redis); the smallest of up to five jobs is taken, the first within budget
// ending the run, as the deadline reaper's sweep, a key-rest lookup or the tenant
// index's trim may fall in a job's window.
func TestOneSearchJobRedisBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole fleet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	if _, ok := f.Redis.(*redis.ClusterClient); ok {
		t.Skip("MONITOR is per node: the budget is measured on a single Redis")
	}
	mon, err := MonitorPrefix(ctx, testenv.RedisURL(), f.Env.KeyPrefix+":")
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	hc := &http.Client{Transport: fleet.Transport(), Timeout: 30 * time.Second}
	meter := RedisMeter{Stats: f.Stats, Counter: f.Counter}
	best, bestTrips := CommandStats(nil), int64(0)
	within := func() bool {
		return best != nil && best.Total() <= oneSearchJobCommands && bestTrips <= oneSearchJobRoundTrips
	}
	for i := range 5 {
		if within() {
			break
		}
		if !meter.Quiet(ctx, 300*time.Millisecond, 10*time.Second) {
			t.Fatal("the fleet's Redis client never fell quiet")
		}
		s0, c0 := mon.Counts(), f.Counter.Counts()
		if _, err := (&Client{Base: f.URL, HTTP: hc}).Ask(ctx, fmt.Sprintf("Search the web: what is new today, item %d? sim:engine=brave", i)); err != nil {
			t.Fatal(err)
		}
		if !meter.Quiet(ctx, 300*time.Millisecond, 10*time.Second) {
			t.Fatal("the fleet's Redis client never fell quiet after the job")
		}
		s, c := mon.Counts().Delta(s0), f.Counter.Counts().Sub(c0)
		t.Logf("job %d: %d commands (%s), %d round trips, %d of them key-rest lookups", i, s.Total(), FormatTop(s, 30, 1), c.RoundTrips, c.RestTrips)
		if s["pttl"] > oneSearchJobRestLookups || c.RestTrips > oneSearchJobRestLookups {
			t.Errorf("job %d made %d key-rest lookups in %d round trips, over %d", i, s["pttl"], c.RestTrips, oneSearchJobRestLookups)
		}
		delete(s, "pttl")
		if trips := c.RoundTrips - c.RestTrips; best == nil || s.Total() < best.Total() || (s.Total() == best.Total() && trips < bestTrips) {
			best, bestTrips = s, trips
		}
	}
	if !within() {
		t.Errorf("a one-search job cost %d Redis commands in %d round trips besides its key-rest lookups, over its budget of %d in %d: %s",
			best.Total(), bestTrips, oneSearchJobCommands, oneSearchJobRoundTrips, FormatTop(best, 30, 1))
	}
}
