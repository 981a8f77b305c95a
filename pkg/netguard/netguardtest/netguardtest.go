// Package netguardtest holds what the tests of every user of the SSRF guard share:
// the forms of non-public addresses the guard must refuse, and a resolver that maps
// test names to chosen addresses.
package netguardtest

import (
	"context"
	"net"
	"net/netip"
	"strings"
)

// MapResolver answers from its map, and asks the system resolver for other names
// ("localhost").
type MapResolver map[string][]string

func (m MapResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
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

// Resolver maps the names the SSRF tests use.
var Resolver = MapResolver{
	"public.example":   {"93.184.216.34"},
	"public6.example":  {"2606:4700:4700::1111"},
	"internal.example": {"10.0.0.5"},
	"mixed.example":    {"93.184.216.34", "10.0.0.5"},
	"mapped.example":   {"::ffff:169.254.169.254"},
}

// RefusedURLs are URLs the guard refuses: every form of a non-public address
// (private, loopback, link-local, CGNAT, unspecified, multicast, IPv4 written as IPv6,
// IPv4 written the ways the C resolver reads, names resolving to any of them with
// Resolver), non-http schemes and URLs without a host.
var RefusedURLs = []string{
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
	"http://public.example/" + strings.Repeat("a", 2048), // too long
}
