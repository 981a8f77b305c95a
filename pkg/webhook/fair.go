package webhook

import (
	"math/rand/v2"
	"net/url"
	"sync"
	"time"
)

// Deliveries are shared fairly between tenants and destinations. One ingress makes at
// most Config.Pool deliveries at once; of those, one tenant has at most
// Config.TenantInFlight, and one destination host at most Config.HostInFlight, shared
// by the tenants that deliver there. Each (tenant, host) pair has a limit of its own:
// it starts at Config.HostInFlight; an attempt that fails for the host's sake (an
// error, a timeout, a 5xx or 429 answer) halves it, down to 1, and any other answer
// raises it by one again. So a tenant whose callbacks fail at a shared host (a path of
// a Zapier- or Slack-style service) lowers only its own share of that host; the
// others' deliveries there go on at their own pace. A delivery that would pass a cap
// is not made and does not wait in the pool: it goes back to the WEBHOOKS stream to be
// tried again after about Config.Defer (longer the more often it was held back), and
// the hold-back is neither an attempt of the retry schedule nor a failure.

// The defaults of the fairness settings (Config's zero values).
const (
	DefaultPool           = 64
	DefaultTenantInFlight = 8
	DefaultHostInFlight   = 16
	DefaultDefer          = time.Second
)

// maxDeferFactor bounds how much longer than Config.Defer a delivery held back many
// times waits.
const maxDeferFactor = 8

// The reasons a delivery is held back (fleet_webhook_deferred_total's label).
const (
	deferTenant = "tenant"
	deferHost   = "destination"
)

// fairness counts the deliveries in progress per tenant, per destination host and
// per (tenant, host).
type fairness struct {
	tenantCap, hostCap int

	mu      sync.Mutex
	tenants map[string]int
	hosts   map[string]int           // deliveries in progress per host
	pairs   map[tenantHost]*hostLoad // per (tenant, host): in progress and its limit
}

type tenantHost struct{ tenant, host string }

// hostLoad is one tenant's deliveries in progress to one host and its current limit.
type hostLoad struct {
	inFlight, limit int
}

func newFairness(tenantCap, hostCap int) *fairness {
	if tenantCap <= 0 {
		tenantCap = DefaultTenantInFlight
	}
	if hostCap <= 0 {
		hostCap = DefaultHostInFlight
	}
	return &fairness{tenantCap: tenantCap, hostCap: hostCap, tenants: map[string]int{}, hosts: map[string]int{}, pairs: map[tenantHost]*hostLoad{}}
}

// acquire takes a place for a delivery of tenant to host. It returns the reason it
// cannot ("tenant" or "destination"), or a done to call with whether the host answered
// well: done gives the place back and adjusts the tenant's limit at the host.
func (f *fairness) acquire(tenant, host string) (done func(ok bool), reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tenants[tenant] >= f.tenantCap {
		return nil, deferTenant
	}
	key := tenantHost{tenant, host}
	p := f.pairs[key]
	if p == nil {
		p = &hostLoad{limit: f.hostCap}
		f.pairs[key] = p
	}
	if f.hosts[host] >= f.hostCap || p.inFlight >= p.limit {
		if p.inFlight == 0 && p.limit == f.hostCap {
			delete(f.pairs, key)
		}
		return nil, deferHost
	}
	f.tenants[tenant]++
	f.hosts[host]++
	p.inFlight++
	var once sync.Once
	return func(ok bool) { once.Do(func() { f.release(key, ok) }) }, ""
}

func (f *fairness) release(key tenantHost, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tenants[key.tenant]--; f.tenants[key.tenant] <= 0 {
		delete(f.tenants, key.tenant)
	}
	if f.hosts[key.host]--; f.hosts[key.host] <= 0 {
		delete(f.hosts, key.host)
	}
	p := f.pairs[key]
	p.inFlight--
	if ok {
		p.limit = min(p.limit+1, f.hostCap)
	} else {
		p.limit = max(p.limit/2, 1)
	}
	if p.inFlight == 0 && p.limit == f.hostCap {
		delete(f.pairs, key) // a healthy idle pair needs no entry
	}
}

// deferFor is how long a delivery held back for the n-th time waits: Config.Defer
// times min(n, 8), jittered by ±50% so held-back deliveries do not come back together.
func deferFor(base time.Duration, n int) time.Duration {
	if base <= 0 {
		base = DefaultDefer
	}
	d := base * time.Duration(min(max(n, 1), maxDeferFactor))
	return d/2 + rand.N(d)
}

// destOf is the destination a callback URL's deliveries count against: its host and
// port.
func destOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "?"
	}
	return u.Host
}
