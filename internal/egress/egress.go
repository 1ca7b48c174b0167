// Package egress guards the connections Filigrane opens to addresses that customers choose (webhook
// endpoints, storage destinations): it resolves the host itself, refuses the whole request when any address it
// resolves to lies in a range a customer must not reach through us (loopback, private, link-local, CGNAT,
// multicast, unspecified, reserved, cloud metadata; IPv4, IPv6 and IPv4 embedded in IPv6), and connects to the
// very address it checked, so a second DNS answer cannot swap in another target (DNS rebinding). It decides
// nothing about HTTP, retries or what is sent; it must not keep state between connections.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrRefused is wrapped by every refusal of a target address or URL.
var ErrRefused = errors.New("egress: target refused")

// RefusedError says which address was refused and which range it fell in.
type RefusedError struct {
	Host  string     // the name or literal the caller asked for
	Addr  netip.Addr // the address that was refused
	Range string     // the range's name, e.g. "loopback", "cloud metadata"
}

func (e *RefusedError) Error() string {
	if e.Host != "" && e.Host != e.Addr.String() {
		return fmt.Sprintf("egress: %s resolves to %s (%s), which is not reachable from this service", e.Host, e.Addr, e.Range)
	}
	return fmt.Sprintf("egress: %s (%s) is not reachable from this service", e.Addr, e.Range)
}

// Unwrap makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Unwrap() error { return ErrRefused }

// Resolver resolves host names; *net.Resolver satisfies it. Tests inject one that answers what they need.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Guard checks and dials targets. The zero value refuses every special range and uses the system resolver.
type Guard struct {
	// AllowPrivate lets targets in private, loopback, link-local, CGNAT and other non-public unicast ranges
	// through. It is an operator option for development and tests (a receiver on 127.0.0.1); cloud metadata,
	// multicast and unspecified addresses stay refused even then.
	AllowPrivate bool
	// Resolver resolves host names; nil means net.DefaultResolver.
	Resolver Resolver
	// Timeout bounds one connection attempt (DNS excluded); 0 means 10 s. The caller's context bounds the
	// whole dial.
	Timeout time.Duration
}

type rangeKind int

const (
	kindPrivate  rangeKind = iota // refused unless AllowPrivate
	kindAlways                    // refused always
	kindEmbedded                  // carries an IPv4 address: check that one
)

type namedRange struct {
	prefix netip.Prefix
	name   string
	kind   rangeKind
}

// metadata lists single addresses of cloud instance-metadata services. They lie inside ranges refused
// anyway; naming them keeps them refused under AllowPrivate.
var metadata = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, OpenStack, DigitalOcean...
	netip.MustParseAddr("169.254.170.2"),   // AWS ECS task metadata
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
	netip.MustParseAddr("192.0.0.192"),     // Oracle Cloud
	netip.MustParseAddr("fd00:ec2::254"),   // AWS over IPv6
}

func p(s, name string, k rangeKind) namedRange {
	return namedRange{prefix: netip.MustParsePrefix(s), name: name, kind: k}
}

// ranges are the refused ranges (IANA special-purpose registries, RFC 6890 and successors). Order matters
// only for the name reported: more specific ranges come first.
var ranges = []namedRange{
	// IPv4
	p("0.0.0.0/8", "unspecified (this network)", kindAlways),
	p("10.0.0.0/8", "private", kindPrivate),
	p("100.64.0.0/10", "shared address space (CGNAT)", kindPrivate),
	p("127.0.0.0/8", "loopback", kindPrivate),
	p("169.254.0.0/16", "link-local", kindPrivate),
	p("172.16.0.0/12", "private", kindPrivate),
	p("192.0.0.0/24", "IETF protocol assignments", kindPrivate),
	p("192.0.2.0/24", "documentation", kindPrivate),
	p("192.88.99.0/24", "6to4 relay anycast", kindPrivate),
	p("192.168.0.0/16", "private", kindPrivate),
	p("198.18.0.0/15", "benchmarking", kindPrivate),
	p("198.51.100.0/24", "documentation", kindPrivate),
	p("203.0.113.0/24", "documentation", kindPrivate),
	p("224.0.0.0/4", "multicast", kindAlways),
	p("255.255.255.255/32", "broadcast", kindAlways),
	p("240.0.0.0/4", "reserved", kindPrivate),
	// IPv6
	p("::/128", "unspecified", kindAlways),
	p("::1/128", "loopback", kindPrivate),
	p("::ffff:0:0/96", "IPv4-mapped", kindEmbedded),
	p("::/96", "IPv4-compatible (deprecated)", kindPrivate),
	p("64:ff9b::/96", "NAT64", kindEmbedded),
	p("64:ff9b:1::/48", "local-use NAT64", kindPrivate),
	p("100::/64", "discard-only", kindPrivate),
	p("2001:db8::/32", "documentation", kindPrivate),
	p("2001::/23", "IETF protocol assignments (Teredo, benchmarking, ORCHID)", kindPrivate),
	p("2002::/16", "6to4", kindEmbedded),
	p("3fff::/20", "documentation", kindPrivate),
	p("fc00::/7", "unique local (private)", kindPrivate),
	p("fe80::/10", "link-local", kindPrivate),
	p("fec0::/10", "site-local (deprecated)", kindPrivate),
	p("ff00::/8", "multicast", kindAlways),
}

// Check reports whether a may be connected to: nil, or a *RefusedError naming the range.
func (g *Guard) Check(a netip.Addr) error { return g.check("", a) }

func (g *Guard) check(host string, a netip.Addr) error {
	refuse := func(name string) error { return &RefusedError{Host: host, Addr: a, Range: name} }
	if !a.IsValid() {
		return refuse("invalid")
	}
	a = a.WithZone("") // a zone only selects an interface; the address decides
	for _, m := range metadata {
		if a == m || (a.Is4In6() && a.Unmap() == m) {
			return refuse("cloud metadata")
		}
	}
	for _, r := range ranges {
		if !r.prefix.Contains(a) {
			continue
		}
		switch r.kind {
		case kindAlways:
			return refuse(r.name)
		case kindPrivate:
			if g.AllowPrivate {
				return nil
			}
			return refuse(r.name)
		case kindEmbedded:
			inner, ok := embeddedIPv4(r.prefix, a)
			if !ok {
				return refuse(r.name)
			}
			if err := g.check(host, inner); err != nil {
				return refuse(r.name + " of " + err.(*RefusedError).Range)
			}
			return nil
		}
	}
	return nil
}

// embeddedIPv4 extracts the IPv4 address an IPv6 address of prefix carries: the last 32 bits for IPv4-mapped
// and NAT64, bits 16..48 for 6to4.
func embeddedIPv4(prefix netip.Prefix, a netip.Addr) (netip.Addr, bool) {
	b := a.As16()
	switch prefix.Bits() {
	case 96:
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case 16:
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// Resolve returns the addresses of host (a name or an IP literal), refusing them all when any one is refused:
// a name that answers both a public and a private address is a rebinding attempt or a mistake either way.
func (g *Guard) Resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if a, err := netip.ParseAddr(host); err == nil {
		if err := g.check(host, a); err != nil {
			return nil, err
		}
		return []netip.Addr{a.WithZone("")}, nil
	}
	if host == "" {
		return nil, fmt.Errorf("%w: empty host", ErrRefused)
	}
	var r Resolver = net.DefaultResolver
	if g.Resolver != nil {
		r = g.Resolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("egress: resolve %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("egress: resolve %s: no addresses", host)
	}
	for _, a := range addrs {
		if err := g.check(host, a); err != nil {
			return nil, err
		}
	}
	return addrs, nil
}

// DialContext resolves and checks address's host, then connects to the checked addresses in turn. It has the
// signature of net.Dialer.DialContext, for http.Transport.DialContext. The dialer's Control re-checks the
// address the socket is about to connect to, so that nothing between the check and the connect (a proxy
// setting, a future change here) can reach a refused address.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, fmt.Errorf("%w: network %q", ErrRefused, network)
	}
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("egress: address %q: %w", address, err)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || port == 0 {
		return nil, fmt.Errorf("%w: port %q", ErrRefused, portText)
	}
	addrs, err := g.Resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	timeout := g.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	d := net.Dialer{Timeout: timeout, Control: g.control}
	var errs []error
	for _, a := range addrs {
		if (network == "tcp4" && !a.Unmap().Is4()) || (network == "tcp6" && a.Is4()) {
			continue
		}
		conn, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("egress: %s has no %s address", host, network)
	}
	return nil, fmt.Errorf("egress: connect to %s: %w", host, errors.Join(errs...))
}

// control runs just before connect(2) with the literal address being connected to.
func (g *Guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: unparsable socket address %q", ErrRefused, address)
	}
	return g.Check(ap.Addr())
}

// MaxURLLength bounds a target URL.
const MaxURLLength = 2048

// ValidateURL checks the shape of a customer-supplied target URL: absolute http or https, a host, no user
// information (credentials in URLs end up in logs), no fragment, at most MaxURLLength bytes. It resolves
// nothing: where the host points is checked at every connection by DialContext.
func ValidateURL(raw string) (*url.URL, error) {
	if len(raw) > MaxURLLength {
		return nil, fmt.Errorf("%w: the URL is longer than %d bytes", ErrRefused, MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: the URL does not parse", ErrRefused)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%w: the URL must start with https:// or http://", ErrRefused)
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("%w: the URL has no host", ErrRefused)
	case u.User != nil:
		return nil, fmt.Errorf("%w: the URL must not carry a user name or password", ErrRefused)
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return nil, fmt.Errorf("%w: the URL must not carry a fragment", ErrRefused)
	case u.Opaque != "":
		return nil, fmt.Errorf("%w: the URL is not a hierarchical http(s) URL", ErrRefused)
	}
	if ps := u.Port(); ps != "" {
		if n, err := strconv.ParseUint(ps, 10, 16); err != nil || n == 0 {
			return nil, fmt.Errorf("%w: the URL's port is not 1..65535", ErrRefused)
		}
	}
	return u, nil
}
