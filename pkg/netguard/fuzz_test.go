package netguard

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

// fuzzResolver answers every name with one public address, or fails with the
// resolver's address in its words; it records whether it was asked.
type fuzzResolver struct {
	asked bool
	fail  bool
}

func (r *fuzzResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.asked = true
	if r.fail {
		return nil, &net.DNSError{Err: "server misbehaving", Name: host, Server: "10.255.255.53:53"}
	}
	return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
}

// FuzzCheckURL: whatever the URL, a host the guard accepts is public by every parser
// that could read it as an address (inet_aton's, Go's net.ParseIP and netip's), so no
// spelling of a private address gets through; a host that looks like an address never
// reaches DNS; and no error names the resolver's address.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{
		"https://example.com/hook", "http://127.0.0.1/", "http://2130706433/", "http://0177.0.0.1/", "http://0x7f.1/", "http://127.1/",
		"http://[::ffff:127.0.0.1]/", "http://[64:ff9b::a00:5]/", "http://[2002:a00:1::]/", "http://[fe80::1%25eth0]/", "http://1.2.3.4.5/",
		"http://0x1g/", "http://10.0.0.1./", "http://user:pw@[::1]:80/x?y", "http://%31%32%37.0.0.1/", "http://ｌｏｃａｌｈｏｓｔ/", "http://0/",
		"http://[::]/", "http://[::127.0.0.1]/", "http://[2001:0:4136:e378:8000:63bf:f5ff:fffe]/", "http://100.64.0.1/", "http://08.1/",
	} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, raw string, fail bool) {
		r := &fuzzResolver{fail: fail}
		g := &Guard{Resolver: r}
		u, err := g.CheckURL(context.Background(), raw)
		if err != nil {
			if strings.Contains(err.Error(), "10.255.255.53") {
				t.Fatalf("error names the resolver: %v", err)
			}
			return
		}
		host := u.Hostname()
		if _, ok := parseIPLiteral(host); (ok || looksNumeric(host)) && r.asked {
			t.Fatalf("address-like host %q went to DNS", host)
		}
		for _, a := range addrsOf(host) {
			if g.CheckAddr(a) != nil {
				t.Fatalf("%q accepted, but its host %q is %s, which is refused", raw, host, a)
			}
		}
		if uu, err := url.Parse(raw); err != nil || uu.Hostname() != host {
			t.Fatalf("accepted URL %q parses differently: %v", raw, err)
		}
	})
}

// addrsOf is every address any parser reads host as.
func addrsOf(host string) []netip.Addr {
	var out []netip.Addr
	if a, ok := parseIPLiteral(host); ok {
		out = append(out, a)
	}
	if ip := net.ParseIP(strings.TrimSuffix(host, ".")); ip != nil {
		a, _ := netip.AddrFromSlice(ip)
		out = append(out, a)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		out = append(out, a)
	}
	return out
}

// FuzzParseInetAton: an address inet_aton reads prints as a dotted quad that reads
// back as the same address, and it agrees with netip on every dotted quad netip
// accepts.
func FuzzParseInetAton(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "2130706433", "0177.0.0.1", "0x7f.1", "127.1", "0x", "1.2.3.4.5", "255.255.255.255", "4294967296", "00000000001.2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := parseInetAton(s)
		if ok {
			if back, ok2 := parseInetAton(a.String()); !ok2 || back != a || !a.Is4() {
				t.Fatalf("%q reads as %s, which reads back as %s (%v)", s, a, back, ok2)
			}
		}
		if n, err := netip.ParseAddr(s); err == nil && n.Is4() && (!ok || n != a) {
			t.Fatalf("%q: netip reads %s, inet_aton %s (%v)", s, n, a, ok)
		}
	})
}
