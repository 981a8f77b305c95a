package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/netguard/netguardtest"
)

// mapResolver and testResolver are shared with the other users of the guard
// (webhooks, web_fetch), which must refuse the same forms.
type mapResolver = netguardtest.MapResolver

var testResolver = netguardtest.Resolver

// Every form of a non-public address is refused: private, loopback, link-local,
// CGNAT, unspecified, multicast, IPv4 written as IPv6, IPv4 written the ways the C
// resolver reads (decimal, octal, hex, short), names resolving to any of them; and so
// are non-http schemes and URLs without a host.
func TestCheckURLRefuses(t *testing.T) {
	t.Parallel()
	g := &Guard{Resolver: testResolver}
	for _, u := range netguardtest.RefusedURLs {
		_, err := g.CheckURL(t.Context(), u)
		if err == nil {
			t.Errorf("%q admitted", u)
			continue
		}
		if !errors.Is(err, ErrRefused) {
			t.Errorf("%q: error %v does not wrap ErrRefused", u, err)
		}
	}
}

// An error names the host, not the URL's credentials, path or query.
func TestCheckURLErrorsHideCredentials(t *testing.T) {
	t.Parallel()
	g := &Guard{Resolver: testResolver}
	_, err := g.CheckURL(t.Context(), "http://alice:hunter2@internal.example/hook?token=tok123")
	if err == nil {
		t.Fatal("admitted")
	}
	for _, s := range []string{"hunter2", "alice", "tok123", "/hook"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error %q contains %q", err, s)
		}
	}
	if !strings.Contains(err.Error(), "internal.example") {
		t.Errorf("error %q does not name the host", err)
	}
}

// A refusal says "not a public address" and nothing of what the host resolved to:
// naming the address would let a client map the fleet's internal DNS by registering
// callbacks (internal.example → 10.0.0.5). The host named is only what the client sent.
func TestRefusalNamesNoResolvedAddress(t *testing.T) {
	t.Parallel()
	g := &Guard{Resolver: testResolver}
	for host, addrs := range testResolver {
		_, err := g.CheckURL(t.Context(), "https://"+host+"/hook")
		if err == nil {
			continue // public
		}
		if !strings.Contains(err.Error(), "not a public address") {
			t.Errorf("%s: error %q does not say why", host, err)
		}
		for _, a := range addrs {
			for _, form := range []string{a, netip.MustParseAddr(a).Unmap().String()} {
				if strings.Contains(err.Error(), form) {
					t.Errorf("%s: error %q names the resolved address %s", host, err, form)
				}
			}
		}
	}
	for _, raw := range []string{"http://0x7f.1/", "http://[::ffff:a00:5]/", "http://2130706433/"} {
		_, err := g.CheckURL(t.Context(), raw)
		if err == nil || strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), "10.0.0.5") {
			t.Errorf("%s: error %v names the address the host stands for", raw, err)
		}
	}
}

type failingResolver struct{ err error }

func (f failingResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return nil, f.err
}

// A name that does not resolve is refused with why, never with the resolver's address.
func TestCheckURLErrorsHideTheResolver(t *testing.T) {
	t.Parallel()
	for _, de := range []*net.DNSError{
		{Err: "no such host", Name: "gone.example", Server: "10.255.255.53:53", IsNotFound: true},
		{Err: "i/o timeout", Name: "gone.example", Server: "10.255.255.53:53", IsTimeout: true},
		{Err: "server misbehaving", Name: "gone.example", Server: "10.255.255.53:53"},
	} {
		_, err := (&Guard{Resolver: failingResolver{de}}).CheckURL(t.Context(), "https://gone.example/hook")
		if err == nil || strings.Contains(err.Error(), "10.255.255.53") || !strings.Contains(err.Error(), "gone.example") {
			t.Errorf("error %v: want the host named and the resolver not", err)
		}
	}
}

// A name that does not resolve is refused in the words of one that resolves to a
// private address: the guard tells no client which names exist on the fleet's network.
func TestUnresolvableAndPrivateNamesOneWording(t *testing.T) {
	t.Parallel()
	_, private := (&Guard{Resolver: testResolver}).CheckURL(t.Context(), "http://internal.example/hook")
	_, gone := (&Guard{Resolver: failingResolver{&net.DNSError{Err: "no such host", Name: "gone.example", IsNotFound: true}}}).CheckURL(t.Context(), "http://gone.example/hook")
	if private == nil || gone == nil || strings.ReplaceAll(gone.Error(), "gone.example", "internal.example") != private.Error() || !errors.Is(gone, ErrNotPublic) {
		t.Errorf("a private name: %v; an unresolvable one: %v; want the same words", private, gone)
	}
}

// Public addresses and names are admitted, with or without credentials.
func TestCheckURLAdmits(t *testing.T) {
	t.Parallel()
	g := &Guard{Resolver: testResolver}
	for _, u := range []string{
		"http://public.example/hook",
		"https://public.example:8443/hook?x=1",
		"https://user:pass@public.example/hook",
		"https://public6.example/",
		"http://93.184.216.34/",
		"http://1572395042/", // 93.184.216.34 in decimal: still that address
		"http://[2606:4700:4700::1111]/",
		"HTTPS://public.example/",
	} {
		if _, err := g.CheckURL(t.Context(), u); err != nil {
			t.Errorf("%q refused: %v", u, err)
		}
	}
}

// An allow-listed range is admitted, however its addresses are written; ranges
// outside it are still refused.
func TestAllowList(t *testing.T) {
	t.Parallel()
	g := &Guard{Resolver: testResolver, Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}}
	for _, u := range []string{"http://internal.example/", "http://10.0.0.5/", "http://[::ffff:10.0.0.5]/", "http://0x0a000005/", "http://10.5/", "http://[fd12::1]/"} {
		if _, err := g.CheckURL(t.Context(), u); err != nil {
			t.Errorf("%q refused: %v", u, err)
		}
	}
	for _, u := range []string{"http://127.0.0.1/", "http://192.168.0.1/", "http://[fc00::1]/", "http://[::ffff:127.0.0.1]/", "http://localhost/"} {
		if _, err := g.CheckURL(t.Context(), u); err == nil {
			t.Errorf("%q admitted", u)
		}
	}
}

// IPv4 hosts are read as inet_aton reads them.
func TestParseInetAton(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"2130706433":    "127.0.0.1",
		"0177.0.0.1":    "127.0.0.1",
		"0x7f000001":    "127.0.0.1",
		"0x7f.0.0.1":    "127.0.0.1",
		"127.1":         "127.0.0.1",
		"127.0.1":       "127.0.0.1",
		"127.1.256":     "127.1.1.0",
		"1.2.3.4":       "1.2.3.4",
		"0":             "0.0.0.0",
		"0x":            "0.0.0.0",
		"4294967295":    "255.255.255.255",
		"0300.0250.1.1": "192.168.1.1",
		"10.0x10.0.1":   "10.16.0.1",
	} {
		a, ok := parseInetAton(in)
		if !ok || a.String() != want {
			t.Errorf("parseInetAton(%q) = %v %v, want %s", in, a, ok, want)
		}
	}
	for _, in := range []string{"", "4294967296", "256.1.1.1", "1.2.3.256", "1.2.65536", "1.2.3.4.5", "08.0.0.1", "1..2", "0x1g", "a.b.c.d", "-1", "+1", "1_0"} {
		if a, ok := parseInetAton(in); ok {
			t.Errorf("parseInetAton(%q) = %v, want no address", in, a)
		}
	}
}

// The guard's dialer refuses loopback when it is not allowed, even for an IP literal,
// and reaches it when it is.
func TestDialLiteral(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	if _, err := (&Guard{}).DialContext(t.Context(), "tcp", addr); !errors.Is(err, ErrRefused) {
		t.Errorf("dial %s without an allow-list: %v", addr, err)
	}
	c, err := (&Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}).DialContext(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatalf("dial %s allowed: %v", addr, err)
	}
	c.Close()
	// The Control hook checks the very address connected to.
	g := &Guard{}
	if err := g.control("tcp4", addr, nil); !errors.Is(err, ErrRefused) {
		t.Errorf("control(%s): %v", addr, err)
	}
	if err := g.control("tcp4", "93.184.216.34:443", nil); err != nil {
		t.Errorf("control(public): %v", err)
	}
}

func ExampleGuard_CheckURL() {
	g := &Guard{}
	for _, u := range []string{"http://0x7f.1/", "ftp://example.com/"} {
		_, err := g.CheckURL(context.Background(), u)
		fmt.Println(err)
	}
	// Output:
	// host 0x7f.1: callback address refused: not a public address
	// callback address refused: the callback url must be http or https, not "ftp"
}

// A connect that fails names the host the client gave, never the address it resolved
// to: a delivery's failure reason reaches the client in the job's events.
func TestDialFailureNamesNoAddress(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there now
	g := &Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Resolver: mapResolver{"closed.example": {"127.0.0.1"}}}
	_, err = g.DialContext(t.Context(), "tcp", fmt.Sprintf("closed.example:%d", port))
	if err == nil {
		t.Fatal("dial to a closed port succeeded")
	}
	if strings.Contains(err.Error(), "127.0.0.1") || !strings.Contains(err.Error(), "closed.example") {
		t.Errorf("error %q: want the host named and the address not", err)
	}
}
