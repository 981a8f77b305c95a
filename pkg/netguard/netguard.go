// Package netguard keeps the fleet's outbound HTTP away from its own network (SSRF):
// a Guard refuses URLs and addresses that are private, loopback, link-local,
// multicast or otherwise non-public unless allow-listed, and checks again on every
// connection. Webhook deliveries (pkg/webhook) and web_fetch (pkg/fetch) both dial
// through it.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrRefused means a callback URL or the address it resolves to may not be called:
// it is not http(s), has no host, or reaches a private, loopback, link-local,
// multicast or otherwise non-public address outside the allow-list. Every refusal
// wraps it, at validation time and at dial time alike.
var ErrRefused = errors.New("callback address refused")

// Resolver looks a host name up; *net.Resolver is one. Tests give the guard their own
// to map names to chosen addresses without touching DNS or global state.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Guard keeps callbacks away from the fleet's own network (SSRF). It checks a URL
// when a callback is registered and again on every connection: its DialContext
// resolves the host itself, checks every address and connects to the checked address,
// so a name that resolves differently between check and connect (DNS rebinding) gains
// nothing.
type Guard struct {
	// Allow lists ranges that are admitted although non-public (tests allow loopback;
	// an operator may allow an internal receiver). An address is admitted if it, or
	// the IPv4 address it embeds, lies in one of them.
	Allow []netip.Prefix
	// Resolver resolves host names; nil means net.DefaultResolver.
	Resolver Resolver
	// DialTimeout bounds one TCP connect (default 10s).
	DialTimeout time.Duration
}

// blocked are the non-public ranges a callback may not reach unless allow-listed:
// besides what netip's predicates cover (loopback, RFC 1918 and fc00::/7 private,
// link-local, multicast, unspecified), the IANA special-purpose ranges that are not
// globally reachable or that a gateway would route inwards.
var blocked = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network": 0.x reaches the local host on Linux
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT (RFC 6598)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking networks
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and 255.255.255.255 broadcast
	netip.MustParsePrefix("100::/64"),        // discard-only
	netip.MustParsePrefix("fec0::/10"),       // deprecated site-local
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use IPv4/IPv6 translation
	netip.MustParsePrefix("2001:db8::/32"),   // documentation: never a real receiver
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation (TEST-NET-1)
	netip.MustParsePrefix("198.51.100.0/24"), // documentation (TEST-NET-2)
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation (TEST-NET-3)
}

// maxURLLen bounds a callback URL: longer ones are not receivers, and the URL travels
// with every delivery message.
const maxURLLen = 2048

// CheckShape checks what can be checked of a callback URL without resolving it: it
// parses, is http or https, has a host and a valid port, and is not too long.
// Errors name the host at most, never credentials or the query.
func CheckShape(raw string) (*url.URL, error) {
	if len(raw) > maxURLLen {
		return nil, fmt.Errorf("%w: the callback url is longer than %d bytes", ErrRefused, maxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: the callback url does not parse", ErrRefused)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%w: the callback url must be http or https, not %q", ErrRefused, u.Scheme)
	}
	host := u.Hostname()
	if u.Opaque != "" || host == "" {
		return nil, fmt.Errorf("%w: the callback url has no host", ErrRefused)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return nil, fmt.Errorf("%w: host %s: %q is not a port", ErrRefused, host, p)
		}
	}
	return u, nil
}

// NewClient returns an HTTP client whose every connection goes through g's
// DialContext (resolved, checked, connected to the checked address), that uses no
// proxy (it would connect on the client's behalf, unchecked) and follows no redirects
// (a 3xx is the answer; a caller that follows them checks each location itself).
func NewClient(g *Guard) *http.Client {
	t := &http.Transport{
		Proxy:                 nil,
		DialContext:           g.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// CheckURL parses a callback URL and refuses it unless it is http or https with a
// host whose every address is public or allow-listed. Errors name the host, never
// credentials or the query of the URL.
func (g *Guard) CheckURL(ctx context.Context, raw string) (*url.URL, error) {
	u, err := CheckShape(raw)
	if err != nil {
		return nil, err
	}
	host := u.Hostname()
	addrs, err := g.Resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	if err := g.checkAll(host, addrs); err != nil {
		return nil, err
	}
	return u, nil
}

// Resolve returns the addresses a host stands for. IP literals are parsed the way the
// C resolver's inet_aton parses them (so "2130706433", "0177.0.0.1", "0x7f.1" and
// "127.1" are all 127.0.0.1), not the way net.ParseIP does; a host that looks numeric
// but is no valid address is refused rather than passed to DNS, and so is a non-ASCII
// host (punycode is the unambiguous form). Other names go to the resolver.
func (g *Guard) Resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, ok := parseIPLiteral(host); ok {
		return []netip.Addr{a}, nil
	}
	if looksNumeric(host) {
		return nil, fmt.Errorf("%w: host %s looks like an IP address but is not a valid one", ErrRefused, host)
	}
	if strings.ContainsFunc(host, func(r rune) bool { return r >= 0x80 || r <= ' ' }) {
		return nil, fmt.Errorf("%w: host %q must be ASCII (write internationalized names in punycode)", ErrRefused, host)
	}
	var r Resolver = net.DefaultResolver
	if g.Resolver != nil {
		r = g.Resolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if de, ok := errors.AsType[*net.DNSError](err); ok && de.IsTimeout {
		// The resolver's own words name the resolver's address: the client gets why.
		return nil, fmt.Errorf("resolving host %s: the lookup timed out", host)
	}
	if err != nil || len(addrs) == 0 {
		// In the words of a name that resolves to a private address: which names
		// exist on the fleet's network is not told apart from which do not.
		return nil, fmt.Errorf("host %s: %w", host, ErrNotPublic)
	}
	return addrs, nil
}

// checkAll refuses host if any of its addresses is refused: a name with one public
// and one private address could be steered to the private one.
func (g *Guard) checkAll(host string, addrs []netip.Addr) error {
	for _, a := range addrs {
		if err := g.CheckAddr(a); err != nil {
			return fmt.Errorf("host %s: %w", host, err)
		}
	}
	return nil
}

// ErrNotPublic (wrapping ErrRefused) is the refusal of a non-public address. It never
// names the address: a host's resolved addresses are the fleet's view of DNS
// (internal names included), and telling a client which address a name resolved to
// would make the guard a DNS oracle for the fleet's network.
var ErrNotPublic = fmt.Errorf("%w: not a public address", ErrRefused)

// CheckAddr refuses an address that is not public, unless the allow-list admits it.
// An IPv6 address that carries an IPv4 address (IPv4-mapped, IPv4-compatible, SIIT,
// NAT64, 6to4, Teredo) is also judged by that IPv4 address. The error does not name
// the address.
func (g *Guard) CheckAddr(a netip.Addr) error {
	a = a.WithZone("").Unmap()
	for _, c := range append([]netip.Addr{a}, embeddedIPv4(a)...) {
		if nonPublic(c) && !inAny(g.Allow, c) {
			return ErrNotPublic
		}
	}
	return nil
}

// inAny reports whether a lies in one of prefixes.
func inAny(prefixes []netip.Prefix, a netip.Addr) bool {
	return slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Contains(a) })
}

// nonPublic reports whether a is an address a callback may not reach by default.
func nonPublic(a netip.Addr) bool {
	if !a.IsValid() || a.IsUnspecified() || a.IsLoopback() || a.IsPrivate() || a.IsMulticast() ||
		a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() {
		return true
	}
	return inAny(blocked, a)
}

// embeddedIPv4 returns the IPv4 addresses an IPv6 address carries by a well-known
// convention, so that, say, 64:ff9b::a00:5 (NAT64 to 10.0.0.5) is refused like
// 10.0.0.5. IPv4-mapped addresses are unmapped before this is called.
func embeddedIPv4(a netip.Addr) []netip.Addr {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	v4 := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{b[i], b[i+1], b[i+2], b[i+3]}) }
	zero := func(from, to int) bool {
		for _, x := range b[from:to] {
			if x != 0 {
				return false
			}
		}
		return true
	}
	switch {
	case zero(0, 12): // IPv4-compatible ::a.b.c.d (:: and ::1 are caught as themselves)
		return []netip.Addr{v4(12)}
	case zero(0, 8) && b[8] == 0xff && b[9] == 0xff && b[10] == 0 && b[11] == 0: // SIIT ::ffff:0:a.b.c.d
		return []netip.Addr{v4(12)}
	case b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b: // NAT64 64:ff9b::/96 and 64:ff9b:1::/48
		return []netip.Addr{v4(12)}
	case b[0] == 0x20 && b[1] == 0x02: // 6to4 2002:a.b.c.d::/48
		return []netip.Addr{v4(2)}
	case b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0: // Teredo: server, and client XOR 0xffffffff
		c := v4(12).As4()
		for i := range c {
			c[i] ^= 0xff
		}
		return []netip.Addr{v4(4), netip.AddrFrom4(c)}
	}
	return nil
}

// parseIPLiteral parses an IPv6 literal (a URL's bracketed host, brackets removed,
// zone allowed) or an IPv4 address in any form inet_aton accepts.
func parseIPLiteral(host string) (netip.Addr, bool) {
	if strings.Contains(host, ":") {
		a, err := netip.ParseAddr(host)
		return a, err == nil
	}
	return parseInetAton(strings.TrimSuffix(host, "."))
}

// parseInetAton parses an IPv4 address as the C library's inet_aton does: one to
// four parts separated by dots, each decimal, octal (leading 0) or hex (leading 0x);
// the last part fills the bytes the earlier ones leave (a → 32 bits, a.b → 8.24,
// a.b.c → 8.8.16).
func parseInetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if s == "" || len(parts) > 4 {
		return netip.Addr{}, false
	}
	var out uint64
	for i, p := range parts {
		v, ok := parseInetPart(p)
		if !ok {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if v > 0xff {
				return netip.Addr{}, false
			}
			out |= v << (8 * (3 - i))
			continue
		}
		bits := 8 * (4 - i)
		if v >= 1<<bits {
			return netip.Addr{}, false
		}
		out |= v
	}
	return netip.AddrFrom4([4]byte{byte(out >> 24), byte(out >> 16), byte(out >> 8), byte(out)}), true
}

// parseInetPart parses one part of an inet_aton address.
func parseInetPart(p string) (uint64, bool) {
	base := 10
	switch {
	case p == "":
		return 0, false
	case len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'):
		base, p = 16, p[2:]
		if p == "" {
			return 0, true // "0x" alone is 0 to inet_aton
		}
	case len(p) > 1 && p[0] == '0':
		base, p = 8, p[1:]
	}
	v, err := strconv.ParseUint(p, base, 32)
	return v, err == nil
}

// looksNumeric reports whether a host that is not a valid address still looks like
// one (its last label is made of digits, or is a 0x number), as "1.2.3.4.5" or
// "0x1g" do. No real top-level domain starts with a digit, and resolvers disagree
// about such names, so they are refused instead of resolved.
func looksNumeric(host string) bool {
	host = strings.TrimSuffix(host, ".")
	last := host[strings.LastIndexByte(host, '.')+1:]
	return last != "" && last[0] >= '0' && last[0] <= '9'
}

// DialContext connects to addr ("host:port") the guarded way: it resolves the host
// itself, refuses if any address is refused, and dials the checked addresses in turn,
// checking each again just before the connect (the dialer's Control hook).
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("host %s: bad port %q", host, portStr)
	}
	addrs, err := g.Resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	if err := g.checkAll(host, addrs); err != nil {
		return nil, err
	}
	timeout := g.DialTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	d := net.Dialer{Timeout: timeout, Control: g.control}
	var last error
	for _, a := range addrs {
		conn, err := d.DialContext(ctx, network, netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		last = err
	}
	return nil, dialFailure(host, last)
}

// dialFailure says why connecting to host failed in words that name no address: the
// dialer's own errors (*net.OpError) spell out the resolved address and port, which
// reach the client in a webhook's failure reason or a web_fetch result. It keeps
// what callers branch on: ErrRefused, timeouts, the context's end.
func dialFailure(host string, err error) error {
	var ne net.Error
	switch {
	case errors.Is(err, ErrRefused):
		return fmt.Errorf("host %s: %w", host, ErrNotPublic)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("connecting to host %s: %w", host, context.Canceled)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("connecting to host %s: %w", host, context.DeadlineExceeded)
	case errors.As(err, &ne) && ne.Timeout():
		return &dialError{host: host, why: "the connection timed out", timeout: true}
	case errors.Is(err, syscall.ECONNREFUSED):
		return &dialError{host: host, why: "the connection was refused"}
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return &dialError{host: host, why: "the host is unreachable"}
	case errors.Is(err, syscall.ECONNRESET):
		return &dialError{host: host, why: "the connection was reset"}
	}
	return &dialError{host: host, why: "the connection failed"}
}

// dialError is a failed connect, named by host only. It is a net.Error, so a timeout
// still reads as one.
type dialError struct {
	host, why string
	timeout   bool
}

func (e *dialError) Error() string   { return "connecting to host " + e.host + ": " + e.why }
func (e *dialError) Timeout() bool   { return e.timeout }
func (e *dialError) Temporary() bool { return e.timeout }

// control is the dialer's last check, on the very address the socket connects to.
func (g *Guard) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot check %s", ErrRefused, address)
	}
	return g.CheckAddr(ap.Addr())
}
