package bus

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/time/rate"
)

// Fair shares of a worker's slots. A family of work (new chat jobs, resumes, one
// engine's searches) is split into lanes, one subject and one durable consumer per
// band and tenant (lanes.go). A process running a family has a fixed number of slots
// (ConsumeOptions.Concurrency); whenever one is free it asks the server for the next
// message of one lane, chosen so:
//
//  1. bands in order: a lane of a higher band is served before any of a lower one;
//  2. within a band, the tenant furthest below its share (running / weight smallest),
//     then the tenant that started the fewest messages lately (per weight; a count
//     of its starts halving every recentHalf), then the tenant served least
//     recently, then that tenant's lane served least recently (round robin across
//     tenants with equal standing, and across one tenant's batches);
//  3. a tenant is served only while it holds less than its share of the slots,
//     ⌈slots × weight / W⌉ (W: the weights of the tenants running or waiting), and
//     less than its cap (Share.Max). Spare slots are lent beyond the share only while
//     more than a reserve (slots/8, at least one of four or more) stay free, or while the tenant is below the share it
//     would have if one more tenant came: a flooding tenant leaves the reserve free, so a
//     tenant that arrives finds slots at once, without waiting for the flood's work.
//
// A lane's messages wait in the stream, not in the worker: a fetch asks for one
// message (or, when one lane alone is eligible, as many as may start at once), and
// each fetched message starts at once. The process learns which lanes hold messages
// from the stream (its per-subject counts, read every refreshEvery) and from the
// publishes themselves (a core-NATS subscription to the family's lane subjects,
// which wakes it when a message arrives); a message its handler had redelivered
// after a delay wakes its lane when the delay is over (dueIn).
//
// A band may be paced (FairSpec.Rates; the batch band at FLEET_BATCH_RATE): its
// lanes are asked only while its token bucket holds a token, so a message over the
// rate waits in the stream too. The pace is kept in the choice, not in the handler:
// a handler that waits for a token after its message was fetched holds a slot of
// the band and a place in the limiter's queue, so the band's slots fill with a
// large batch's lines waiting their turn, and a small batch arriving beside it
// waits for every one of them, whatever the order above says. Paced in the choice,
// each token goes to the lane the order names when the token is due: the small
// batch's tenant, below its share, takes the band's next starts, and the large
// batch takes every token the small one leaves. Where lines are short, as paced
// ones are, running counts are near zero for every tenant and do not rank them; the
// starts of lately rank them instead: a tenant arriving beside one that has taken
// every start for a while takes the next starts until its count nears the other's,
// which meanwhile decays, so neither starves. Not taken: shortest lane first (fewest messages waiting)
// would rank lanes by counts up to refreshEvery old and let a stream of small
// batches starve a large one; a reserve of the band's slots for an arriving tenant
// does not help while the rate, not the slots, binds, and the order above already
// gives an arriving tenant each slot that frees.
//
// The counts are each process's own: every process reads every lane and keeps its
// own reserve, so across N processes a tenant holds at most N shares and a flood
// leaves a slot free in each (docs/architecture.md, Fair shares).

// Share is a tenant's claim on a process's slots of one family.
type Share struct {
	// Weight is the tenant's weight (≤ 0: 1).
	Weight int
	// Max caps the slots the tenant holds at once (≤ 0: its share only).
	Max int
}

// Shares returns the share of the tenant whose subject token is tenant (Token).
type Shares func(tenant string) Share

// FairSpec is a family of lanes.
type FairSpec struct {
	// Family names the family: its stream, its durable name (which prefixes the lane
	// consumers' names, and under which dead letters of every lane are filed) and the
	// delivery settings every lane consumer takes. The family's own consumer is not
	// made: its work is in the lanes.
	Family ConsumerSpec
	// Prefix is the lanes' subject prefix: Prefix.<band>.<tenant>[.<key>].
	Prefix string
	// Bands caps the slots a band may hold (absent or 0: all of them).
	Bands map[string]int
	// Rates paces a band: at most this many of its messages start per second in
	// this process, in bursts of a tenth of that (at least one); absent or ≤ 0: no
	// pace. A message over the rate waits in the stream, not in a slot.
	Rates map[string]float64
}

// Fair timing constants.
const (
	refreshEvery = 2 * time.Second        // how often the lanes are read from the stream
	dryFirst     = 250 * time.Millisecond // how long an empty lane rests before it is asked again
	dryMax       = 2 * time.Second
	// expectLag is how long after a message is expected on a lane an empty ask may
	// mean it has not arrived yet (the stream has not stored a told publish; the
	// server has not put a delayed redelivery back); such a lane rests expectRetry,
	// doubling, meanwhile. dueSlack is how long after its delay a redelivered
	// message's lane is asked (the nak reaches the server after the handler returns).
	expectLag   = 50 * time.Millisecond
	expectRetry = time.Millisecond
	dueSlack    = 5 * time.Millisecond
	// laneIdle is how long a lane consumer nobody reads lives on the server
	// (InactiveThreshold): a tenant's lanes come and go with its traffic.
	laneIdle = time.Hour
	// recentHalf is how fast a tenant's count of recent starts halves.
	recentHalf = 1500 * time.Millisecond
)

// JobLanes is the family of new chat jobs (the chatworker durable), banded sync,
// async, batch; batch lines hold at most batchSlots of the slots.
func JobLanes(t Timing, batchSlots int) FairSpec {
	return FairSpec{Family: ChatConsumer(t), Prefix: prefixJobLanes, Bands: map[string]int{BandBatch: batchSlots}}
}

// ResumeLanes is the family of finished server-tool calls (the chatworker-resume
// durable).
func ResumeLanes(t Timing) FairSpec {
	return FairSpec{Family: ResumeConsumer(t), Prefix: prefixResumeLanes}
}

// ResearchLanes is the family of research runs' steps (the researcher durable),
// banded async and batch (a batch line's run's steps, per batch).
func ResearchLanes(t Timing) FairSpec {
	return FairSpec{Family: ResearchConsumer(t), Prefix: SubjectResearch}
}

// SearchLanes is the family of one engine's web_search calls (the
// searchworker-<engine> durable).
func SearchLanes(engine string, t Timing) FairSpec {
	return FairSpec{Family: SearchConsumer(engine, t), Prefix: SubjectSearch(engine)}
}

// laneSpec is the durable consumer of one lane of family.
func (f FairSpec) laneSpec(l Lane) ConsumerSpec {
	c := f.Family
	c.Config.Durable = laneConsumer(f.Family.Config.Durable, l)
	c.Config.FilterSubject = f.Prefix + "." + l.Band + "." + l.Tenant
	if l.Key != "" {
		c.Config.FilterSubject += "." + l.Key
	}
	c.Config.Description = "lane " + l.Band + "/" + l.Tenant + " of " + f.Family.Config.Durable
	c.Config.InactiveThreshold = laneIdle
	return c
}

// ConsumeFair starts handling a family's lanes with h, fair shares of
// o.Concurrency slots by shares, until Drain or Stop.
func ConsumeFair[T Payload](ctx context.Context, b *Bus, spec FairSpec, shares Shares, h Handler[T], o ConsumeOptions) (*Worker, error) {
	if o.Concurrency <= 0 {
		o.Concurrency = 16
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = max(spec.Family.Config.AckWait/3, time.Second)
	}
	if o.Log == nil {
		o.Log = b.log
	}
	if shares == nil {
		shares = func(string) Share { return Share{} }
	}
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f := &fair[T]{
		b: b, spec: spec, shares: shares, slots: o.Concurrency,
		lanes:   map[Lane]*lane{},
		running: map[string]int{}, served: map[string]uint64{}, inBand: map[string]int{},
		paces: paces(spec.Rates), recent: map[string]*recent{}, wake: make(chan struct{}, 1), stop: make(chan struct{}),
	}
	f.r = &runner[T]{b: b, spec: spec.Family, h: h, o: o, decode: decodeMsg[T], delayed: f.dueIn}
	sub, err := b.nc.Subscribe(b.Subject(spec.Prefix)+subjectLanesAll, func(m *nats.Msg) {
		if l, ok := LaneOf(spec.Prefix, b.localSubject(m.Subject)); ok {
			f.seen(l)
		}
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("consumer %s: %w", spec.Family.Config.Durable, err)
	}
	w := &Worker{name: spec.Family.Config.Durable, loopDone: make(chan struct{}), hardStop: cancel}
	w.stopTaking = func() {
		_ = sub.Unsubscribe()
		f.stopOnce.Do(func() { close(f.stop) })
	}
	w.stopNow = w.stopTaking
	f.w = w
	go f.loop(hctx)
	return w, nil
}

type lane struct {
	Lane
	cons jetstream.Consumer
	// served orders lanes by when they were last served (round robin).
	served uint64
	// dryUntil: the lane was empty when last asked; it rests until then (or until a
	// message is published on it). dry is the current rest.
	dryUntil time.Time
	dry      time.Duration
	// expect is when a message was last expected on the lane: a publish this process
	// was told of (told as the server routes it, which may be before the stream has
	// stored it) or a delayed redelivery falling due. An ask that finds nothing just
	// after rests only briefly, or the message would wait out a whole rest.
	expect time.Time
}

type fair[T Payload] struct {
	b      *Bus
	spec   FairSpec
	shares Shares
	slots  int
	r      *runner[T]
	w      *Worker

	mu      sync.Mutex
	lanes   map[Lane]*lane
	running map[string]int    // tenant → messages being handled
	served  map[string]uint64 // tenant → when last served (round robin across tenants)
	inBand  map[string]int    // band → messages being handled
	total   int
	clock   uint64
	paces   map[string]*rate.Limiter // band → its start rate (FairSpec.Rates)
	recent  map[string]*recent       // tenant → its starts of lately
	// paced is when the first paced band that has a lane to ask gets its next token
	// (zero: none waits for one).
	paced time.Time

	wake     chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
}

// seen notes that lane l holds a message now: a publish, or a delayed redelivery due.
func (f *fair[T]) seen(l Lane) {
	f.mu.Lock()
	ln := f.lanes[l]
	if ln == nil {
		ln = &lane{Lane: l}
		f.lanes[l] = ln
	}
	ln.dryUntil, ln.dry, ln.expect = time.Time{}, 0, time.Now()
	f.mu.Unlock()
	f.poke()
}

func (f *fair[T]) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *fair[T]) loop(ctx context.Context) {
	defer close(f.w.loopDone)
	f.refresh(ctx)
	// The stream is read beside the loop, which a slow read must not hold up.
	refreshed := make(chan struct{})
	defer func() { <-refreshed }()
	go func() {
		defer close(refreshed)
		tick := time.NewTicker(refreshEvery)
		defer tick.Stop()
		for {
			select {
			case <-f.stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				f.refresh(ctx)
				f.poke()
			}
		}
	}()
	for {
		select {
		case <-f.stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		ln, n := f.pick(time.Now())
		if ln == nil {
			wait := f.nextDry(time.Now())
			timer := time.NewTimer(wait)
			select {
			case <-f.stop:
				timer.Stop()
				return
			case <-ctx.Done():
				timer.Stop()
				return
			case <-f.wake:
			case <-timer.C:
			}
			timer.Stop()
			continue
		}
		if got := f.fetch(ctx, ln, n); got == 0 {
			f.emptied(ln, time.Now())
		}
	}
}

// emptied rests ln, which an ask found empty at now: doubling from dryFirst, or from
// expectRetry while a message expected just before may not have arrived yet.
func (f *fair[T]) emptied(ln *lane, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	first := dryFirst
	if now.Sub(ln.expect) < expectLag {
		first = expectRetry
	}
	ln.dry = min(max(2*ln.dry, first), dryMax)
	ln.dryUntil = now.Add(ln.dry)
}

// dueIn has the lane of a message the runner has redelivered after delay (Retry,
// Defer, a transient failure's back-off) asked again when the delay is over. Such a
// message waits in the stream where no publish announces it, and the lane, found
// empty meanwhile, rests (dryFirst, doubling): without the wake a step polled every
// 50 ms (a provider agent's run) would be taken every 250 ms or more.
func (f *fair[T]) dueIn(subject string, delay time.Duration) {
	l, ok := LaneOf(f.spec.Prefix, subject)
	if !ok {
		return
	}
	time.AfterFunc(delay+dueSlack, func() {
		select {
		case <-f.stop:
		default:
			f.seen(l)
		}
	})
}

// nextDry is how long until the first resting lane may be asked again (at most
// refreshEvery).
func (f *fair[T]) nextDry(now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	wait := refreshEvery
	for _, ln := range f.lanes {
		if d := ln.dryUntil.Sub(now); d > 0 && d < wait {
			wait = d
		}
	}
	if !f.paced.IsZero() {
		wait = min(wait, f.paced.Sub(now))
	}
	return max(wait, time.Millisecond)
}

// refresh reads the lanes that hold messages from the stream's per-subject counts,
// and forgets lanes that hold none.
func (f *fair[T]) refresh(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := f.b.js.Stream(rctx, f.b.Name(f.spec.Family.Stream))
	if err != nil {
		f.r.o.Log.Warn("fair: reading lanes", "consumer", f.w.name, "err", err)
		return
	}
	info, err := s.Info(rctx, jetstream.WithSubjectFilter(f.b.Subject(f.spec.Prefix)+subjectLanesAll))
	if err != nil {
		f.r.o.Log.Warn("fair: reading lanes", "consumer", f.w.name, "err", err)
		return
	}
	have := map[Lane]bool{}
	for subj, n := range info.State.Subjects {
		if l, ok := LaneOf(f.spec.Prefix, f.b.localSubject(subj)); ok && n > 0 {
			have[l] = true
		}
	}
	f.mu.Lock()
	for l, ln := range f.lanes {
		if !have[l] && f.running[l.Tenant] == 0 && ln.dryUntil.After(time.Now()) {
			delete(f.lanes, l)
		}
	}
	for l := range have {
		if f.lanes[l] == nil {
			f.lanes[l] = &lane{Lane: l}
		}
	}
	for t, r := range f.recent {
		if r.at(time.Now()) < 0.01 {
			delete(f.recent, t)
		}
	}
	f.mu.Unlock()
}

// pick chooses the lane to ask next and how many messages to ask for; nil when no
// lane may be asked now.
func (f *fair[T]) pick(now time.Time) (*lane, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paced = time.Time{}
	free := f.slots - f.total
	if free <= 0 {
		return nil, 0
	}
	// W counts the tenants running and those whose lanes are thought to hold messages.
	weights := map[string]int{}
	for _, ln := range f.lanes {
		if !ln.dryUntil.After(now) {
			weights[ln.Tenant] = f.weight(ln.Tenant)
		}
	}
	for t := range f.running {
		weights[t] = f.weight(t)
	}
	sumW := 0
	for _, w := range weights {
		sumW += w
	}
	reserve := f.slots / 8
	if f.slots >= 4 {
		reserve = max(reserve, 1)
	}
	var cands []*lane
	tokens := 0 // the chosen band's tokens (paced bands only)
	for _, band := range Bands {
		if c := f.spec.Bands[band]; c > 0 && f.inBand[band] >= c {
			continue
		}
		for _, ln := range f.lanes {
			if ln.Band != band || ln.dryUntil.After(now) || f.room(ln.Tenant, f.weight(ln.Tenant), sumW, free, reserve) <= 0 {
				continue
			}
			cands = append(cands, ln)
		}
		if lim := f.paces[band]; lim != nil && len(cands) > 0 {
			have := lim.TokensAt(now)
			if tokens = int(have); tokens < 1 {
				// Its lanes wait in the stream for the token; a lower band may start.
				due := now.Add(time.Duration((1 - have) / float64(lim.Limit()) * float64(time.Second)))
				if f.paced.IsZero() || due.Before(f.paced) {
					f.paced = due
				}
				cands = cands[:0]
				continue
			}
		}
		if len(cands) > 0 {
			break
		}
	}
	if len(cands) == 0 {
		return nil, 0
	}
	lately := map[string]float64{}
	for _, ln := range cands {
		if r := f.recent[ln.Tenant]; r != nil {
			lately[ln.Tenant] = r.at(now) / float64(f.weight(ln.Tenant))
		}
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		// running/weight, compared without division
		ra, rb := f.running[a.Tenant]*f.weight(b.Tenant), f.running[b.Tenant]*f.weight(a.Tenant)
		if ra != rb {
			return ra < rb
		}
		if la, lb := lately[a.Tenant], lately[b.Tenant]; la != lb {
			return la < lb
		}
		if sa, sb := f.served[a.Tenant], f.served[b.Tenant]; sa != sb {
			return sa < sb
		}
		return a.served < b.served
	})
	ln := cands[0]
	f.clock++
	ln.served, f.served[ln.Tenant] = f.clock, f.clock
	n := 1
	if len(cands) == 1 {
		// One lane alone may start: ask for as many as may start at once.
		n = min(16, f.room(ln.Tenant, f.weight(ln.Tenant), sumW, free, reserve))
		if c := f.spec.Bands[ln.Band]; c > 0 {
			n = min(n, c-f.inBand[ln.Band])
		}
		if f.paces[ln.Band] != nil {
			n = min(n, tokens)
		}
		n = max(n, 1)
	}
	// The slots are counted taken now (fetch gives back those it did not fill).
	f.take(ln, n)
	return ln, n
}

func (f *fair[T]) weight(tenant string) int {
	if w := f.shares(tenant).Weight; w > 0 {
		return w
	}
	return 1
}

// room is how many more slots tenant may take now (f.mu held).
func (f *fair[T]) room(tenant string, w, sumW, free, reserve int) int {
	run := f.running[tenant]
	share := ceilDiv(f.slots*w, sumW)
	if sumW == w {
		share = f.slots // alone: every slot, less the reserve below
	}
	n := min(free, share-run)
	if m := f.shares(tenant).Max; m > 0 {
		n = min(n, m-run)
	}
	// Up to the share it would have if one more tenant came, and beyond it while
	// more than the reserve stays free.
	return min(n, max(ceilDiv(f.slots*w, sumW+1)-run, free-reserve))
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// paces are the bands' token buckets of FairSpec.Rates. Only the loop takes tokens,
// after a fetch, as many as messages came.
func paces(rates map[string]float64) map[string]*rate.Limiter {
	out := map[string]*rate.Limiter{}
	for band, r := range rates {
		if r > 0 {
			out[band] = rate.NewLimiter(rate.Limit(r), max(1, int(r/10)))
		}
	}
	return out
}

// recent is a decaying count of a tenant's starts: n at t, halving every recentHalf.
type recent struct {
	n float64
	t time.Time
}

func (r *recent) at(now time.Time) float64 {
	return r.n * math.Exp2(-float64(now.Sub(r.t))/float64(recentHalf))
}

// started counts n starts of tenant's at now (f.mu held).
func (f *fair[T]) started(tenant string, n int, now time.Time) {
	r := f.recent[tenant]
	if r == nil {
		r = &recent{}
		f.recent[tenant] = r
	}
	r.n, r.t = r.at(now)+float64(n), now
}

func (f *fair[T]) take(ln *lane, n int) {
	f.running[ln.Tenant] += n
	f.inBand[ln.Band] += n
	f.total += n
}

func (f *fair[T]) release(ln *lane, n int) {
	f.mu.Lock()
	f.running[ln.Tenant] -= n
	if f.running[ln.Tenant] <= 0 {
		delete(f.running, ln.Tenant)
	}
	f.inBand[ln.Band] -= n
	f.total -= n
	f.mu.Unlock()
	f.poke()
}

// fetch asks lane ln for up to n messages (their slots already taken) and starts
// each; it returns how many came.
func (f *fair[T]) fetch(ctx context.Context, ln *lane, n int) int {
	if ln.cons == nil {
		c, err := f.b.EnsureConsumer(ctx, f.spec.laneSpec(ln.Lane))
		if err != nil {
			f.release(ln, n)
			f.r.o.Log.Warn("fair: lane consumer", "consumer", f.w.name, "lane", ln.Band+"/"+ln.Tenant, "err", err)
			return 0
		}
		f.mu.Lock()
		ln.cons = c
		f.mu.Unlock()
	}
	batch, err := ln.cons.FetchNoWait(n)
	got := 0
	if err == nil {
		for msg := range batch.Messages() {
			got++
			f.w.wg.Add(1)
			go func() {
				defer func() {
					f.release(ln, 1)
					f.w.wg.Done()
				}()
				f.r.handle(ctx, msg)
			}()
		}
		err = batch.Error()
	}
	if err != nil && !errors.Is(err, jetstream.ErrNoMessages) && ctx.Err() == nil {
		f.r.o.Log.Debug("fair: fetch", "consumer", f.w.name, "lane", ln.Band+"/"+ln.Tenant, "err", err)
		if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) {
			f.mu.Lock()
			ln.cons = nil // expired while idle: made again on the next ask
			f.mu.Unlock()
		}
	}
	if lim := f.paces[ln.Band]; lim != nil && got > 0 {
		lim.ReserveN(time.Now(), got) // pick asked for no more than the tokens held
	}
	if got < n {
		f.release(ln, n-got)
	}
	if got > 0 {
		f.mu.Lock()
		ln.dryUntil, ln.dry = time.Time{}, 0
		f.started(ln.Tenant, got, time.Now())
		f.mu.Unlock()
	}
	return got
}
