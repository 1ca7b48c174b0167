package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeResolver answers from a table and counts lookups.
type fakeResolver struct {
	answers map[string][]string
	calls   atomic.Int32
}

func (f *fakeResolver) LookupNetIP(_ context.Context, _ string, host string) ([]netip.Addr, error) {
	f.calls.Add(1)
	texts, ok := f.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, t := range texts {
		out = append(out, netip.MustParseAddr(t))
	}
	return out, nil
}

// TestRefusedRanges: one address from each refused range is refused, with the range named, by literal and
// through a DNS name that resolves to it; public addresses pass.
func TestRefusedRanges(t *testing.T) {
	cases := []struct{ addr, rng string }{
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "unspecified"},
		{"10.1.2.3", "private"},
		{"100.64.0.1", "CGNAT"},
		{"100.127.255.254", "CGNAT"},
		{"127.0.0.1", "loopback"},
		{"127.255.0.9", "loopback"},
		{"169.254.1.1", "link-local"},
		{"169.254.169.254", "cloud metadata"},
		{"169.254.170.2", "cloud metadata"},
		{"100.100.100.200", "cloud metadata"},
		{"192.0.0.192", "cloud metadata"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.0.0.8", "IETF"},
		{"192.0.2.1", "documentation"},
		{"192.88.99.1", "6to4 relay"},
		{"192.168.1.1", "private"},
		{"198.18.0.1", "benchmarking"},
		{"198.51.100.1", "documentation"},
		{"203.0.113.1", "documentation"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"240.0.0.1", "reserved"},
		{"255.255.255.255", "broadcast"},
		{"::", "unspecified"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "IPv4-mapped of loopback"},
		{"::ffff:10.0.0.1", "IPv4-mapped of private"},
		{"::ffff:169.254.169.254", "cloud metadata"},
		{"::127.0.0.1", "IPv4-compatible"},
		{"64:ff9b::a00:1", "NAT64 of private"},
		{"64:ff9b:1::1", "local-use NAT64"},
		{"100::1", "discard-only"},
		{"2001::1", "Teredo"},
		{"2001:db8::1", "documentation"},
		{"2002:7f00:1::1", "6to4 of loopback"},
		{"3fff::1", "documentation"},
		{"fc00::1", "unique local"},
		{"fd12:3456::1", "unique local"},
		{"fd00:ec2::254", "cloud metadata"},
		{"fe80::1", "link-local"},
		{"fec0::1", "site-local"},
		{"ff02::1", "multicast"},
	}
	res := &fakeResolver{answers: map[string][]string{}}
	g := &Guard{Resolver: res}
	ctx := context.Background()
	for _, c := range cases {
		a := netip.MustParseAddr(c.addr)
		err := g.Check(a)
		var re *RefusedError
		if !errors.As(err, &re) || !errors.Is(err, ErrRefused) {
			t.Errorf("Check(%s) = %v, want a refusal", c.addr, err)
			continue
		}
		if !strings.Contains(re.Range, c.rng) {
			t.Errorf("Check(%s) names range %q, want one containing %q", c.addr, re.Range, c.rng)
		}
		// The same address behind a DNS name, alone and beside a public address.
		name := "target-" + strings.NewReplacer(".", "-", ":", "-").Replace(c.addr) + ".example"
		res.answers[name] = []string{"93.184.216.34", c.addr}
		if _, err := g.Resolve(ctx, name); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), name) {
			t.Errorf("Resolve(%s -> %s) = %v, want a refusal naming the host", name, c.addr, err)
		}
		if _, err := g.DialContext(ctx, "tcp", net.JoinHostPort(name, "443")); !errors.Is(err, ErrRefused) {
			t.Errorf("DialContext(%s -> %s) = %v, want a refusal", name, c.addr, err)
		}
		if _, err := g.DialContext(ctx, "tcp", net.JoinHostPort(c.addr, "443")); !errors.Is(err, ErrRefused) {
			t.Errorf("DialContext(%s) = %v, want a refusal", c.addr, err)
		}
	}
	for _, ok := range []string{"93.184.216.34", "8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "192.169.0.1",
		"2606:4700:4700::1111", "2001:4860:4860::8888", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"} {
		if err := g.Check(netip.MustParseAddr(ok)); err != nil {
			t.Errorf("Check(%s) = %v, want allowed", ok, err)
		}
	}
}

// TestAllowPrivate: the operator option lets private and loopback targets through, never metadata, multicast
// or unspecified addresses.
func TestAllowPrivate(t *testing.T) {
	g := &Guard{AllowPrivate: true}
	for _, ok := range []string{"127.0.0.1", "10.0.0.1", "192.168.1.1", "::1", "fd12::1", "::ffff:127.0.0.1", "100.64.0.1"} {
		if err := g.Check(netip.MustParseAddr(ok)); err != nil {
			t.Errorf("AllowPrivate: Check(%s) = %v, want allowed", ok, err)
		}
	}
	for _, bad := range []string{"169.254.169.254", "::ffff:169.254.169.254", "fd00:ec2::254", "100.100.100.200",
		"0.0.0.0", "::", "224.0.0.1", "ff02::1"} {
		if err := g.Check(netip.MustParseAddr(bad)); !errors.Is(err, ErrRefused) {
			t.Errorf("AllowPrivate: Check(%s) = %v, want refused", bad, err)
		}
	}
}

// TestDialConnectsToTheCheckedAddress: a name is resolved once and the connection goes to the address that
// was checked: a resolver that would answer something else on a second lookup is never asked again.
func TestDialConnectsToTheCheckedAddress(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	res := &fakeResolver{answers: map[string][]string{"receiver.example": {"127.0.0.1"}}}
	g := &Guard{AllowPrivate: true, Resolver: res}
	client := &http.Client{Transport: &http.Transport{DialContext: g.DialContext, Proxy: nil}, Timeout: 5 * time.Second}
	resp, err := client.Get("http://receiver.example:" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello" || res.calls.Load() != 1 {
		t.Fatalf("body %q after %d lookups, want hello after 1", body, res.calls.Load())
	}
	// Without the operator option the same receiver is refused before any connection.
	strict := &http.Client{Transport: &http.Transport{DialContext: (&Guard{Resolver: res}).DialContext}}
	if _, err := strict.Get("http://receiver.example:" + port + "/"); !errors.Is(err, ErrRefused) {
		t.Fatalf("strict guard: %v, want refused", err)
	}
	// The socket-level check refuses a literal that reaches connect without going through Resolve.
	if err := g.control("tcp4", "169.254.169.254:80", nil); !errors.Is(err, ErrRefused) {
		t.Fatalf("control: %v, want refused", err)
	}
}

func TestValidateURL(t *testing.T) {
	for _, ok := range []string{"https://hooks.example.com/etchv", "http://127.0.0.1:9000/x?y=1", "https://[2606:4700::1]:8443/"} {
		if _, err := ValidateURL(ok); err != nil {
			t.Errorf("ValidateURL(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"ftp://example.com/", "file:///etc/passwd", "https://user:pw@example.com/", "https:///nohost",
		"https://example.com/#frag", "example.com/path", "gopher://x", "https://example.com:0/", "https://example.com:99999/",
		"javascript:alert(1)", "https://" + strings.Repeat("a", MaxURLLength) + ".com/"} {
		if _, err := ValidateURL(bad); !errors.Is(err, ErrRefused) {
			t.Errorf("ValidateURL(%q) = %v, want refused", bad, err)
		}
	}
}
