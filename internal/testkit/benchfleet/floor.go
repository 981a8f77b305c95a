package benchfleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// The floor is what the fleet's architecture costs with no work in it: a job is
// published to the first of Hops JetStream work queues; each hop's worker takes it,
// makes RoundTrips Redis round trips, publishes it to the next queue (waiting for
// the stream's ack, with a Nats-Msg-Id) and acks its own message; the last hop's ack
// ends the job. The streams and consumers have the fleet's settings (pkg/bus: work
// queue retention, file storage, the duplicate window, explicit acks with the chat
// consumer's AckWait, MaxDeliver and MaxAckPending) on an embedded NATS server reached
// in process, as `make run` does; Redis is the one at REDIS_URL. What the floor leaves
// out is everything the fleet does besides: HTTP, the models and engines, JSON,
// the state machine. A fleet job's rate over the floor's, measured in the same run,
// says how much of the machine the fleet's own code takes.

// FloorOptions configure a floor benchmark. Zero values take the defaults.
type FloorOptions struct {
	// Hops is the number of work-queue hops a job makes (default 5: a one-search job
	// goes JOBS, SEARCH, CHAT, and two more steps).
	Hops int
	// RoundTrips is the number of Redis round trips each hop makes (default 2). Each
	// is one EVALSHA of a script that runs HSET and PEXPIRE on the job's hash: 3 Redis
	// commands, 1 round trip.
	RoundTrips int
	// Concurrency is how many messages each hop's worker handles at once (default 64,
	// the search workers' default; the pull batch is the same).
	Concurrency int
	// PayloadBytes is the size of the message each hop carries (default 512).
	PayloadBytes int
	// Memory keeps the streams in memory instead of on disk.
	Memory bool
	// RedisURL defaults to REDIS_URL (testenv.RedisURL). The floor dials its own
	// client, so Counter counts only the floor.
	RedisURL string
}

func (o FloorOptions) withDefaults() FloorOptions {
	if o.Hops <= 0 {
		o.Hops = 5
	}
	if o.RoundTrips < 0 {
		o.RoundTrips = 0
	} else if o.RoundTrips == 0 {
		o.RoundTrips = 2
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 64
	}
	if o.PayloadBytes <= 0 {
		o.PayloadBytes = 512
	}
	if o.RedisURL == "" {
		o.RedisURL = testenv.RedisURL()
	}
	return o
}

// floorScript is one round trip: a state write (HSET) that keeps the job's hash
// alive (PEXPIRE), the shape of the fleet's store-and-mark scripts.
var floorScript = redis.NewScript(`
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`)

// FloorCommandsPerRoundTrip is what one round trip of the floor costs in Redis
// commands as INFO commandstats counts them: the EVALSHA and the two it runs.
const FloorCommandsPerRoundTrip = 3

const floorHeaderJob = "Floor-Job"

// Floor is a running floor benchmark.
type Floor struct {
	// Options are the options in effect (defaults filled in).
	Options FloorOptions
	// Storage is "file" or "memory".
	Storage string
	// Counter counts the floor's Redis commands and round trips (client side).
	Counter *RedisCounter
	// Redis is the floor's own client.
	Redis redis.UniversalClient

	nats    *bus.Embedded
	b       *bus.Bus
	dir     string
	prefix  string
	payload []byte
	value   string
	ttl     string
	waiting sync.Map // job id → chan error
	seq     atomic.Int64
	iters   []jetstream.MessagesContext
	loops   sync.WaitGroup
	steps   sync.WaitGroup
	cancel  context.CancelFunc
}

// FloorStreams are the floor's streams: the fleet's work-queue stream settings (those
// of JOBS) under the floor's names and subjects, one stream a hop.
func FloorStreams(o FloorOptions) []jetstream.StreamConfig {
	o = o.withDefaults()
	var tmpl jetstream.StreamConfig
	for _, s := range bus.Streams(bus.Limits{Memory: o.Memory}) {
		if s.Name == bus.StreamJobs {
			tmpl = s
		}
	}
	out := make([]jetstream.StreamConfig, o.Hops)
	for h := range o.Hops {
		c := tmpl
		c.Name, c.Subjects = "FLOOR_"+strconv.Itoa(h+1), []string{floorSubject(h + 1)}
		c.Description = fmt.Sprintf("floor benchmark: hop %d of %d", h+1, o.Hops)
		out[h] = c
	}
	return out
}

// FloorConsumers are the floor's durable consumers, one a stream: the fleet's chat
// consumer settings (bus.ChatConsumer with the default timing) under the floor's
// names.
func FloorConsumers(o FloorOptions) []jetstream.ConsumerConfig {
	o = o.withDefaults()
	tmpl := bus.ChatConsumer(bus.DefaultTiming[bus.ConsumerChat]).Config
	out := make([]jetstream.ConsumerConfig, o.Hops)
	for h := range o.Hops {
		c := tmpl
		c.Durable, c.FilterSubject = "floor-"+strconv.Itoa(h+1), floorSubject(h+1)
		c.Description = fmt.Sprintf("floor benchmark: hop %d", h+1)
		out[h] = c
	}
	return out
}

func floorSubject(hop int) string { return "floor.v1.hop" + strconv.Itoa(hop) }

// StartFloor starts the floor's NATS server, streams and workers.
func StartFloor(ctx context.Context, o FloorOptions) (_ *Floor, err error) {
	o = o.withDefaults()
	f := &Floor{Options: o, Storage: "file", Counter: NewRedisCounter(),
		prefix:  fmt.Sprintf("sffloor:%d", time.Now().UnixNano()),
		payload: []byte(strings.Repeat("x", o.PayloadBytes)),
		value:   strings.Repeat("v", 64),
		ttl:     strconv.FormatInt((10 * time.Minute).Milliseconds(), 10)}
	if o.Memory {
		f.Storage = "memory"
	}
	defer func() {
		if err != nil {
			f.Stop()
		}
	}()
	if f.Redis, err = state.Dial(ctx, o.RedisURL, 10*time.Second); err != nil {
		return nil, err
	}
	if err := floorScript.Load(ctx, f.Redis).Err(); err != nil {
		return nil, fmt.Errorf("floor: loading the script: %w", err)
	}
	f.Redis.AddHook(f.Counter)
	if f.dir, err = os.MkdirTemp("", "benchfloor-nats"); err != nil {
		return nil, err
	}
	if f.nats, err = bus.RunEmbedded("127.0.0.1", -1, f.dir); err != nil {
		return nil, err
	}
	if f.b, err = f.nats.Connect(ctx, "searchfleet-floor", slog.New(slog.DiscardHandler)); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f.cancel = cancel
	consumers := FloorConsumers(o)
	for h, sc := range FloorStreams(o) {
		if _, err := f.b.RawJetStream().CreateOrUpdateStream(ctx, sc); err != nil {
			return nil, fmt.Errorf("floor: stream %s: %w", sc.Name, err)
		}
		cons, err := f.b.RawJetStream().CreateOrUpdateConsumer(ctx, sc.Name, consumers[h])
		if err != nil {
			return nil, fmt.Errorf("floor: consumer %s: %w", consumers[h].Durable, err)
		}
		// As bus.Consume pulls: a batch of Concurrency, a goroutine a message.
		iter, err := cons.Messages(jetstream.PullMaxMessages(o.Concurrency), jetstream.PullHeartbeat(5*time.Second))
		if err != nil {
			return nil, fmt.Errorf("floor: consumer %s: %w", consumers[h].Durable, err)
		}
		f.iters = append(f.iters, iter)
		f.loops.Add(1)
		go f.consume(wctx, h+1, iter)
	}
	return f, nil
}

// consume runs one hop's worker until its iterator stops.
func (f *Floor) consume(ctx context.Context, hop int, iter jetstream.MessagesContext) {
	defer f.loops.Done()
	sem := make(chan struct{}, f.Options.Concurrency)
	for {
		sem <- struct{}{}
		msg, err := iter.Next(jetstream.NextContext(ctx))
		if err != nil {
			<-sem
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) || ctx.Err() != nil {
				return
			}
			continue
		}
		f.steps.Add(1)
		go func() {
			defer func() { <-sem; f.steps.Done() }()
			f.step(ctx, hop, msg)
		}()
	}
}

// step is one hop of one job.
func (f *Floor) step(ctx context.Context, hop int, msg jetstream.Msg) {
	job := msg.Headers().Get(floorHeaderJob)
	err := func() error {
		key := f.prefix + ":" + job
		for r := range f.Options.RoundTrips {
			field := "h" + strconv.Itoa(hop) + "r" + strconv.Itoa(r)
			if err := floorScript.EvalSha(ctx, f.Redis, []string{key}, field, f.value, f.ttl).Err(); err != nil {
				return fmt.Errorf("hop %d: redis: %w", hop, err)
			}
		}
		if hop < f.Options.Hops {
			if err := f.publish(ctx, job, hop+1, msg.Data()); err != nil {
				return err
			}
		}
		return msg.Ack()
	}()
	if err != nil {
		_ = msg.Term()
	}
	if err != nil || hop == f.Options.Hops {
		if ch, ok := f.waiting.LoadAndDelete(job); ok {
			ch.(chan error) <- err
		}
	}
}

func (f *Floor) publish(ctx context.Context, job string, hop int, data []byte) error {
	m := nats.NewMsg(floorSubject(hop))
	m.Data = data
	m.Header.Set(nats.MsgIdHdr, job+":"+strconv.Itoa(hop))
	m.Header.Set(floorHeaderJob, job)
	if _, err := f.b.RawJetStream().PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("hop %d: publish: %w", hop, err)
	}
	return nil
}

// Job runs one job through every hop and returns how long it took.
func (f *Floor) Job(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	job := "j" + strconv.FormatInt(f.seq.Add(1), 10)
	done := make(chan error, 1)
	f.waiting.Store(job, done)
	if err := f.publish(ctx, job, 1, f.payload); err != nil {
		f.waiting.Delete(job)
		return 0, err
	}
	select {
	case err := <-done:
		return time.Since(start), err
	case <-ctx.Done():
		f.waiting.Delete(job)
		return 0, ctx.Err()
	}
}

// Stop stops the workers and the server and deletes the floor's Redis keys.
func (f *Floor) Stop() {
	for _, it := range f.iters {
		it.Stop()
	}
	if f.cancel != nil {
		f.cancel()
	}
	f.loops.Wait()
	f.steps.Wait()
	if f.b != nil {
		f.b.RawConn().Close()
	}
	if f.nats != nil {
		f.nats.Shutdown()
	}
	if f.dir != "" {
		os.RemoveAll(f.dir)
	}
	if f.Redis != nil {
		DeleteKeys(f.Redis, f.prefix)
		f.Redis.Close()
	}
}

// LoadResult is what a closed loop measured.
type LoadResult struct {
	Latencies []time.Duration
	Errors    int
	Elapsed   time.Duration
	// FirstErr is the first error, if any.
	FirstErr error
	// Behind is set when an open loop stopped early: the fleet could not carry its rate.
	Behind bool
}

// add counts one answer: its latency, or its error.
func (r *LoadResult) add(l time.Duration, err error) {
	if err != nil {
		if r.Errors++; r.FirstErr == nil {
			r.FirstErr = err
		}
		return
	}
	r.Latencies = append(r.Latencies, l)
}

// Rate is the completed jobs per second.
func (r LoadResult) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(len(r.Latencies)) / r.Elapsed.Seconds()
}

// OpenLoop offers rate requests per second, answered or not, until d has passed (d >
// 0) or done reports true (done nil: never), and waits for them. With behind > 0 it
// stops early, Behind set, once more than behind requests are unanswered: then the
// fleet cannot carry the rate, and offering more would only grow a backlog.
func OpenLoop(ctx context.Context, one func() (time.Duration, error), rate int, d time.Duration, done func() bool, behind int) LoadResult {
	var (
		mu       sync.Mutex
		res      LoadResult
		inflight atomic.Int64
		wg       sync.WaitGroup
	)
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for next := start; ctx.Err() == nil && (d <= 0 || time.Since(start) < d) && (done == nil || !done()); {
		if behind > 0 && inflight.Load() > int64(behind) {
			res.Behind = true
			break
		}
		next = next.Add(interval)
		time.Sleep(time.Until(next))
		wg.Add(1)
		inflight.Add(1)
		go func() {
			defer wg.Done()
			defer inflight.Add(-1)
			l, err := one()
			mu.Lock()
			res.add(l, err)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	return res
}

// ClosedLoop runs clients that each send their next job when the last is done, for d
// or until limit jobs have been started (limit ≤ 0: no limit), whichever comes first.
func ClosedLoop(ctx context.Context, one func() (time.Duration, error), clients int, d time.Duration, limit int) LoadResult {
	var (
		mu      sync.Mutex
		res     LoadResult
		started atomic.Int64
		wg      sync.WaitGroup
	)
	start := time.Now()
	end := start.Add(d)
	for range max(clients, 1) {
		wg.Add(1)
		go Labeled("client", func() {
			defer wg.Done()
			var mine LoadResult
			for time.Now().Before(end) && ctx.Err() == nil {
				if limit > 0 && started.Add(1) > int64(limit) {
					break
				}
				mine.add(one())
			}
			mu.Lock()
			res.Latencies = append(res.Latencies, mine.Latencies...)
			res.Errors += mine.Errors
			res.FirstErr = cmp.Or(res.FirstErr, mine.FirstErr)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	return res
}
