package webhook

import (
	"math/rand/v2"
	"net/url"
	"sync"
	"time"
)

// Deliveries are shared fairly between tenants and destinations. One ingress makes at
// most Config.Pool deliveries at once; of those, one tenant has at most
// Config.TenantInFlight and one destination host at most its current limit. A host
// starts at Config.HostInFlight; an attempt that fails for the host's sake (an error,
// a timeout, a 5xx or 429 answer) halves it, down to 1, and any other answer raises it
// by one again, up to Config.HostInFlight. A delivery that would pass a cap is not made and does not wait in the
// pool: it goes back to the WEBHOOKS stream to be tried again after about
// Config.Defer (longer the more often it was held back), and the hold-back is neither
// an attempt of the retry schedule nor a failure.

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

// fairness counts the deliveries in progress per tenant and per destination host.
type fairness struct {
	tenantCap, hostCap int

	mu      sync.Mutex
	tenants map[string]int
	hosts   map[string]*hostLoad
}

// hostLoad is one destination's deliveries in progress and its current limit.
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
	return &fairness{tenantCap: tenantCap, hostCap: hostCap, tenants: map[string]int{}, hosts: map[string]*hostLoad{}}
}

// acquire takes a place for a delivery of tenant to host. It returns the reason it
// cannot ("tenant" or "destination"), or a done to call with whether the host answered
// well: done gives the place back and adjusts the host's limit.
func (f *fairness) acquire(tenant, host string) (done func(ok bool), reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tenants[tenant] >= f.tenantCap {
		return nil, deferTenant
	}
	h := f.hosts[host]
	if h == nil {
		h = &hostLoad{limit: f.hostCap}
		f.hosts[host] = h
	}
	if h.inFlight >= h.limit {
		return nil, deferHost
	}
	f.tenants[tenant]++
	h.inFlight++
	var once sync.Once
	return func(ok bool) { once.Do(func() { f.release(tenant, host, ok) }) }, ""
}

func (f *fairness) release(tenant, host string, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tenants[tenant]--; f.tenants[tenant] <= 0 {
		delete(f.tenants, tenant)
	}
	h := f.hosts[host]
	h.inFlight--
	if ok {
		h.limit = min(h.limit+1, f.hostCap)
	} else {
		h.limit = max(h.limit/2, 1)
	}
	if h.inFlight == 0 && h.limit == f.hostCap {
		delete(f.hosts, host) // a healthy idle host needs no entry
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
