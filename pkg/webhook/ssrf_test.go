package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/bus"
)

// mapResolver answers from its map, and asks the system resolver for other names
// ("localhost").
type mapResolver map[string][]string

func (m mapResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	v, ok := m[host]
	if !ok {
		return net.DefaultResolver.LookupNetIP(ctx, network, host)
	}
	var out []netip.Addr
	for _, s := range v {
		out = append(out, netip.MustParseAddr(s))
	}
	return out, nil
}

// testResolver maps the names the SSRF tests use.
var testResolver = mapResolver{
	"public.example":   {"93.184.216.34"},
	"public6.example":  {"2606:4700:4700::1111"},
	"internal.example": {"10.0.0.5"},
	"mixed.example":    {"93.184.216.34", "10.0.0.5"},
	"mapped.example":   {"::ffff:169.254.169.254"},
}

// Every form of a non-public address is refused: private, loopback, link-local,
// CGNAT, unspecified, multicast, IPv4 written as IPv6, IPv4 written the ways the C
// resolver reads (decimal, octal, hex, short), names resolving to any of them; and so
// are non-http schemes and URLs without a host.
func TestCheckURLRefuses(t *testing.T) {
	t.Parallel()
	g := &Guard{Resolver: testResolver}
	for _, u := range []string{
		"http://127.0.0.1/",
		"http://127.0.0.1:8080/hook",
		"http://10.1.2.3/",
		"http://172.16.0.1/",
		"http://172.31.255.255/",
		"http://192.168.1.1/",
		"http://169.254.169.254/latest/meta-data/",
		"http://100.64.0.1/",
		"http://0.0.0.0/",
		"http://0/",
		"http://[::1]/",
		"http://[::]/",
		"http://[fe80::1]/",
		"http://[fe80::1%25eth0]/",
		"http://[fc00::1]/",
		"http://[fd12:3456::1]/",
		"http://[::ffff:127.0.0.1]/",
		"http://[::ffff:7f00:1]/",
		"http://[::ffff:10.0.0.5]/",
		"http://[::127.0.0.1]/",        // IPv4-compatible
		"http://[::ffff:0:7f00:1]/",    // SIIT
		"http://[64:ff9b::a00:5]/",     // NAT64 of 10.0.0.5
		"http://[2002:7f00:1::]/",      // 6to4 of 127.0.0.1
		"http://[2001:0:4136:e378::]/", // Teredo whose client is 255.255.255.255
		"http://2130706433/",           // decimal
		"http://0177.0.0.1/",           // octal
		"http://0x7f000001/",           // hex
		"http://0x7f.0.0.1/",           // hex part
		"http://0X7F.1/",               // hex, short
		"http://127.1/",                // short
		"http://127.0.1/",              // short
		"http://017700000001/",         // octal, one part
		"http://127.0.0.1./",           // trailing dot
		"http://%31%32%37.0.0.1/",      // percent-encoded host
		"http://224.0.0.1/",            // multicast
		"http://[ff02::1]/",            // multicast
		"http://255.255.255.255/",      // broadcast
		"http://1.2.3.4.5/",            // numeric but no address
		"http://08.0.0.1/",             // not octal
		"http://0x7g.1/",               // not hex
		"http://localhost/",            // name resolving to loopback
		"http://localhost:9000/",       // name resolving to loopback
		"http://internal.example/hook", // name resolving to a private address
		"http://mixed.example/",        // one public and one private address
		"http://mapped.example/",       // name resolving to a mapped link-local address
		"ftp://public.example/",        // not http(s)
		"file:///etc/passwd",           // not http(s)
		"gopher://public.example/",     // not http(s)
		"javascript:alert(1)",          // not http(s)
		"http:///hook",                 // no host
		"http://:8080/hook",            // no host
		"http:public.example",          // opaque, no host
		"//public.example/hook",        // no scheme
		"",                             // nothing
		"http://public.example:0/",     // no port
		"http://public.example:99999/", // no port
		"http://ex\u0430mple.com/",     // non-ASCII host
		"http://public.example/" + strings.Repeat("a", maxURLLen), // too long
	} {
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
		t.Fatalf("post after rebinding: %v, want ErrRefused", err)
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
	// host 0x7f.1: callback address refused: 127.0.0.1 is not a public address
	// callback address refused: the callback url must be http or https, not "ftp"
}
