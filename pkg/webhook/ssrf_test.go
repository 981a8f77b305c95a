package webhook

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/netguard"
	"github.com/searchfleet/searchfleet/pkg/netguard/netguardtest"
)

// mapResolver and testResolver map the test names of the guard's shared cases.
type mapResolver = netguardtest.MapResolver

var testResolver = netguardtest.Resolver

// ErrRefused is the guard's refusal, which every refused callback wraps.
var ErrRefused = netguard.ErrRefused

// flipResolver answers a public address the first time and a private one afterwards:
// DNS rebinding between the check and the connect.
type flipResolver struct {
	calls atomic.Int32
	later string
}

func (f *flipResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if f.calls.Add(1) == 1 {
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	}
	return []netip.Addr{netip.MustParseAddr(f.later)}, nil
}

// A name that passes the check and then resolves to a private address is refused at
// connect time: the receiver on that address is never reached.
func TestDialRefusesRebinding(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	s := &Service{Config: Config{Resolver: &flipResolver{later: "127.0.0.1"}}}
	raw := "http://rebind.example:" + port + "/hook"
	if err := s.CheckURL(t.Context(), raw); err != nil {
		t.Fatalf("the first resolution is public: %v", err)
	}
	_, err := s.post(t.Context(), bus.WebhookDelivery{ID: "msg_1", URL: raw, Payload: []byte("{}")}, vectorSecret)
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("post after rebinding: %v, want netguard.ErrRefused", err)
	}
	if strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("post after rebinding: %q names the address the host rebound to", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the private receiver was reached %d times", n)
	}
}

// A redirect, even from an allowed receiver, is not followed: the 3xx is the answer,
// so neither an internal address nor another allowed one is reached.
func TestRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	var followed atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { followed.Add(1) }))
	t.Cleanup(target.Close)
	for _, loc := range []string{"http://169.254.169.254/latest/meta-data/", "http://10.0.0.5/", target.URL + "/"} {
		redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, loc, http.StatusTemporaryRedirect)
		}))
		t.Cleanup(redirector.Close)
		s := &Service{Config: Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}
		s.init()
		code, err := s.post(t.Context(), bus.WebhookDelivery{ID: "msg_1", URL: redirector.URL + "/hook", Payload: []byte("{}")}, vectorSecret)
		if err != nil || code != http.StatusTemporaryRedirect {
			t.Errorf("redirect to %s: %d %v, want the 307 itself", loc, code, err)
		}
	}
	if n := followed.Load(); n != 0 {
		t.Errorf("a redirect was followed %d times", n)
	}
}
