package fleet

import (
	"context"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/config"
)

// consumeFair starts a family of lanes (bus.ConsumeFair) and keeps it for the drain.
func consumeFair[T bus.Payload](ctx context.Context, p *process, spec bus.FairSpec, shares bus.Shares, h bus.Handler[T], concurrency int) error {
	w, err := bus.ConsumeFair(ctx, p.bus, spec, shares, h, p.consumeOptions(concurrency))
	return p.keep(w, spec.Family, err)
}

// shares are the tenants' fair shares of a process's slots (config.Limits weight),
// capped by cap of their limits (maxSteps, maxSearches).
func (p *process) shares(limit func(config.Limits) int) bus.Shares {
	lim := config.NewTenantLimits(p.env.TenantLimits, p.o.File.Tenants)
	own := map[string]config.Limits{}
	for _, id := range lim.Tenants() {
		own[bus.Token(id)] = lim.Of(id)
	}
	def := p.env.TenantLimits.Or(config.Limits{})
	return func(tenant string) bus.Share {
		l, ok := own[tenant]
		if !ok {
			l = def
		}
		return bus.Share{Weight: l.Weight, Max: limit(l)}
	}
}

func maxSteps(l config.Limits) int    { return l.MaxSteps }
func maxSearches(l config.Limits) int { return l.MaxSearches }

// consume starts a consumer and keeps it for the drain.
func consume[T bus.Payload](ctx context.Context, p *process, spec bus.ConsumerSpec, h bus.Handler[T], concurrency int) error {
	w, err := bus.Consume(ctx, p.bus, spec, h, p.consumeOptions(concurrency))
	return p.keep(w, spec, err)
}

// keep keeps a consumer that started (err nil) for the drain, and spec for its lag
// metrics.
func (p *process) keep(w *bus.Worker, spec bus.ConsumerSpec, err error) error {
	if err != nil {
		return err
	}
	p.workers = append(p.workers, w)
	p.started(spec)
	return nil
}

func (p *process) consumeOptions(concurrency int) bus.ConsumeOptions {
	return bus.ConsumeOptions{Concurrency: concurrency, Log: p.log,
		Observe: func(consumer string, d bus.Decision, elapsed time.Duration) {
			p.o.Metrics.ObserveDelivery(consumer, d.Action.String(), elapsed)
		},
		InFlight: func(consumer string, delta int) {
			p.o.Metrics.StepsInFlight.WithLabelValues(consumer).Add(float64(delta))
		}}
}

func (p *process) consumeDeadLetters(ctx context.Context, spec bus.ConsumerSpec, h bus.Handler[bus.DeadLetter]) error {
	w, err := bus.ConsumeDeadLetters(ctx, p.bus, spec, h, p.consumeOptions(4))
	return p.keep(w, spec, err)
}

// timing is a consumer's default timing with the configured AckWait.
func (p *process) timing(name string) bus.Timing {
	t := bus.TimingFor(name)
	t.AckWait = p.env.AckWait
	if name == bus.ConsumerChat || name == bus.ConsumerResume {
		t.MaxAckPending = p.env.ChatInFlight
	}
	return t
}

// drain lets every started consumer finish its in-flight messages, once.
func (p *process) drain() {
	if p.drained {
		return
	}
	p.drained = true
	for _, stop := range p.stops {
		stop()
	}
	dctx, cancel := context.WithTimeout(context.Background(), p.env.DrainTimeout)
	defer cancel()
	for _, w := range p.workers {
		if err := w.Drain(dctx); err != nil {
			p.log.Warn("drain", "err", err)
		}
	}
}
