// Package clientaddr decides which address a request comes from, for the decisions made per client address
// (the unknown-credential buckets, the console's sign-in limit): the connection's peer, or, when that peer is
// a reverse proxy the operator listed as trusted, the address the proxy wrote into X-Forwarded-For.
//
// It trusts X-Forwarded-For only as far as the operator's list reaches: any client can send the header, so
// entries are read from the right (the ones the trusted proxies appended) and the first address that is not
// itself a trusted proxy is the client; everything left of it was written by someone untrusted. A malformed
// entry in the part read means a proxy chain that is not what the list describes, so the connection's address
// is used. The Forwarded header (RFC 7239) is not read: the proxy must set X-Forwarded-For.
//
// It only names an address to count against; it must not be used to grant anything (no allow-lists).
package clientaddr

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/valyala/fasthttp"
)

// Header is the request header trusted proxies append the client address to.
const Header = "X-Forwarded-For"

// Proxies are the trusted reverse proxies. The zero value trusts none: every request's client is its
// connection's peer.
type Proxies struct {
	nets []netip.Prefix
}

// ParseProxies reads a comma-separated list of CIDRs (10.0.0.0/8, fd00::/8) and addresses (a /32 or /128).
// Spaces around entries are ignored; an empty list trusts no proxy.
func ParseProxies(list string) (Proxies, error) {
	var p Proxies
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if strings.Contains(s, "/") {
			pfx, err := netip.ParsePrefix(s)
			if err != nil {
				return Proxies{}, fmt.Errorf("%q: want an address or a CIDR such as 10.0.0.0/8", s)
			}
			if pfx.Addr().Zone() != "" {
				return Proxies{}, fmt.Errorf("%q: an IPv6 zone cannot be trusted", s)
			}
			// A v4-mapped IPv6 prefix (::ffff:10.0.0.0/104) means the IPv4 one; peers are compared unmapped.
			if a := pfx.Addr(); a.Is4In6() && pfx.Bits() >= 96 {
				pfx = netip.PrefixFrom(a.Unmap(), pfx.Bits()-96)
			}
			p.nets = append(p.nets, pfx.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return Proxies{}, fmt.Errorf("%q: want an address or a CIDR such as 10.0.0.0/8", s)
		}
		a = a.Unmap()
		p.nets = append(p.nets, netip.PrefixFrom(a, a.BitLen()))
	}
	return p, nil
}

// String lists the trusted proxies as ParseProxies reads them back.
func (p Proxies) String() string {
	s := make([]string, len(p.nets))
	for i, n := range p.nets {
		s[i] = n.String()
	}
	return strings.Join(s, ",")
}

// Empty reports whether no proxy is trusted.
func (p Proxies) Empty() bool { return len(p.nets) == 0 }

// trusts reports whether a (unmapped) is a trusted proxy.
func (p Proxies) trusts(a netip.Addr) bool {
	for _, n := range p.nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// Of is the client address of ctx: see Client.
func (p Proxies) Of(ctx *fasthttp.RequestCtx) net.IP {
	peer := ctx.RemoteIP()
	if len(p.nets) == 0 {
		return peer
	}
	return p.Client(peer, ctx.Request.Header.PeekAll(Header))
}

// Client is the client address of a request from peer carrying the X-Forwarded-For values forwardedFor (in
// the order they came): peer itself unless it is a trusted proxy; otherwise the right-most forwarded address
// that is not a trusted proxy, the left-most one when all of them are, and peer when there are none or an
// entry read on the way is not an address.
func (p Proxies) Client(peer net.IP, forwardedFor [][]byte) net.IP {
	pa, ok := netip.AddrFromSlice(peer)
	if !ok || !p.trusts(pa.Unmap()) {
		return peer
	}
	var last netip.Addr
	for i := len(forwardedFor) - 1; i >= 0; i-- {
		v := forwardedFor[i]
		for {
			entry := v
			if c := bytes.LastIndexByte(v, ','); c >= 0 {
				entry, v = v[c+1:], v[:c]
			} else {
				v = nil
			}
			a, ok := parseEntry(entry)
			if !ok {
				return peer
			}
			if !p.trusts(a) {
				return net.IP(a.AsSlice())
			}
			last = a
			if v == nil {
				break
			}
		}
	}
	if !last.IsValid() {
		return peer
	}
	return net.IP(last.AsSlice())
}

// parseEntry reads one X-Forwarded-For entry: an address with optional spaces around it, an IPv4 address
// with a port, or a bracketed IPv6 address with or without a port (some proxies append ports). The address
// comes back unmapped (::ffff:1.2.3.4 is 1.2.3.4) and without a zone.
func parseEntry(b []byte) (netip.Addr, bool) {
	s := strings.Trim(string(b), " \t")
	bracketed := strings.HasPrefix(s, "[")
	switch {
	case bracketed:
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		if rest := s[end+1:]; rest != "" && !validPort(rest) {
			return netip.Addr{}, false
		}
		s = s[1:end]
	case strings.Count(s, ":") == 1: // IPv4 with a port; an IPv6 address has at least two colons
		host, port, _ := strings.Cut(s, ":")
		if !validPort(":" + port) {
			return netip.Addr{}, false
		}
		s = host
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" || (bracketed && a.Is4()) {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// validPort reports whether s is ":" and 1 to 5 decimal digits.
func validPort(s string) bool {
	if len(s) < 2 || len(s) > 6 || s[0] != ':' {
		return false
	}
	for _, c := range s[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
