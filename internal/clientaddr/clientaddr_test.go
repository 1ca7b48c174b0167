package clientaddr

import (
	"bufio"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

func TestParseProxies(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{" , ", ""},
		{"127.0.0.1", "127.0.0.1/32"},
		{"10.1.2.3/8, 192.168.0.0/16 ,::1", "10.0.0.0/8,192.168.0.0/16,::1/128"},
		{"fd00::/8", "fd00::/8"},
		{"::ffff:10.0.0.1", "10.0.0.1/32"},
		{"::ffff:10.0.0.0/104", "10.0.0.0/8"},
	} {
		p, err := ParseProxies(tc.in)
		if err != nil {
			t.Fatalf("ParseProxies(%q): %v", tc.in, err)
		}
		if got := p.String(); got != tc.want {
			t.Errorf("ParseProxies(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "10.0.0", "proxy.example.com", "10.0.0.0/8;", "fe80::1%eth0", "1.2.3.4:80", "::/129"} {
		if _, err := ParseProxies("127.0.0.1," + bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseProxies(%q): %v, want an error naming it", bad, err)
		}
	}
}

func TestClient(t *testing.T) {
	p, err := ParseProxies("127.0.0.1, 10.0.0.0/8, fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	proxy, outsider := net.ParseIP("127.0.0.1"), net.ParseIP("198.51.100.7")
	for _, tc := range []struct {
		name string
		peer net.IP
		xff  []string
		want string
	}{
		{"untrusted peer: header ignored", outsider, []string{"203.0.113.9"}, "198.51.100.7"},
		{"trusted peer, no header", proxy, nil, "127.0.0.1"},
		{"one client", proxy, []string{"203.0.113.9"}, "203.0.113.9"},
		{"spoofed left of the real client", proxy, []string{"1.1.1.1, 203.0.113.9"}, "203.0.113.9"},
		{"garbage left of the real client", proxy, []string{"<script>,,, 203.0.113.9"}, "203.0.113.9"},
		{"chain of trusted proxies", proxy, []string{"1.1.1.1, 203.0.113.9, 10.0.0.2, 10.9.9.9"}, "203.0.113.9"},
		{"repeated headers, read as one list", proxy, []string{"1.1.1.1, 203.0.113.9", "10.0.0.2"}, "203.0.113.9"},
		{"all trusted: the left-most", proxy, []string{"10.0.0.5, 10.0.0.2"}, "10.0.0.5"},
		{"tabs and spaces", proxy, []string{" \t203.0.113.9\t "}, "203.0.113.9"},
		{"IPv4 with a port", proxy, []string{"203.0.113.9:51234"}, "203.0.113.9"},
		{"IPv6", proxy, []string{"2001:db8::1"}, "2001:db8::1"},
		{"bracketed IPv6", proxy, []string{"[2001:db8::1]"}, "2001:db8::1"},
		{"bracketed IPv6 with a port", proxy, []string{"[2001:db8::1]:443"}, "2001:db8::1"},
		{"v4-mapped IPv6", proxy, []string{"::ffff:203.0.113.9"}, "203.0.113.9"},
		{"trusted IPv6 proxy in the chain", proxy, []string{"2001:db8::1, fd00::2"}, "2001:db8::1"},
		{"trusted v4-mapped peer", net.ParseIP("::ffff:10.0.0.3"), []string{"203.0.113.9"}, "203.0.113.9"},
		{"malformed right-most: the peer", proxy, []string{"203.0.113.9, nonsense"}, "127.0.0.1"},
		{"empty entry: the peer", proxy, []string{"203.0.113.9,"}, "127.0.0.1"},
		{"empty header: the peer", proxy, []string{""}, "127.0.0.1"},
		{"unknown: the peer", proxy, []string{"unknown"}, "127.0.0.1"},
		{"zone: the peer", proxy, []string{"fe80::1%eth0"}, "127.0.0.1"},
		{"bracketed IPv4: the peer", proxy, []string{"[203.0.113.9]"}, "127.0.0.1"},
		{"bad port: the peer", proxy, []string{"203.0.113.9:http"}, "127.0.0.1"},
		{"long port: the peer", proxy, []string{"203.0.113.9:1234567"}, "127.0.0.1"},
		{"unclosed bracket: the peer", proxy, []string{"[2001:db8::1"}, "127.0.0.1"},
		{"garbage after the bracket: the peer", proxy, []string{"[2001:db8::1]x"}, "127.0.0.1"},
		{"malformed within the trusted part: the peer", proxy, []string{"203.0.113.9, bogus, 10.0.0.2"}, "127.0.0.1"},
	} {
		var xff [][]byte
		for _, h := range tc.xff {
			xff = append(xff, []byte(h))
		}
		if got := p.Client(tc.peer, xff); got.String() != tc.want {
			t.Errorf("%s: Client(%s, %q) = %s, want %s", tc.name, tc.peer, tc.xff, got, tc.want)
		}
	}
	var none Proxies
	if got := none.Client(proxy, [][]byte{[]byte("203.0.113.9")}); !got.Equal(proxy) {
		t.Errorf("no trusted proxies: Client = %s, want the peer", got)
	}
}

// FuzzClient: X-Forwarded-For is written by anyone; whatever it holds, the answer is the peer or an address
// that appears in the header and is not a trusted proxy (or the left-most when all are), never a panic.
func FuzzClient(f *testing.F) {
	for _, s := range []string{"203.0.113.9", "1.1.1.1, 203.0.113.9, 10.0.0.2", "[2001:db8::1]:443", " , ,", "[",
		"::ffff:10.0.0.1", "fe80::1%eth0", "1.2.3.4:", "[::1]:99999"} {
		f.Add(s)
	}
	p, err := ParseProxies("127.0.0.1,10.0.0.0/8")
	if err != nil {
		f.Fatal(err)
	}
	peer := net.ParseIP("127.0.0.1")
	f.Fuzz(func(t *testing.T, h string) {
		got := p.Client(peer, [][]byte{[]byte(h)})
		if got.Equal(peer) {
			return
		}
		a, ok := netip.AddrFromSlice(got)
		if !ok {
			t.Fatalf("Client(%q) = %v, not an address", h, got)
		}
		// The answer came from an entry of the header: some entry parses to it.
		found := false
		for _, e := range strings.Split(h, ",") {
			if b, ok := parseEntry([]byte(e)); ok && b == a {
				found = true
			}
		}
		if !found {
			t.Fatalf("Client(%q) = %s, which is no entry of the header", h, got)
		}
	})
}

// TestOfReadsEveryHeaderLine: a proxy that adds its own X-Forwarded-For line (HAProxy's option forwardfor)
// leaves the client's line before it; Of reads the lines of a parsed request in order, the last one first.
func TestOfReadsEveryHeaderLine(t *testing.T) {
	p, err := ParseProxies("10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	raw := "GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 198.51.100.1\r\nx-forwarded-for: 203.0.113.9\r\n\r\n"
	var req fasthttp.Request
	if err := req.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ peer, want string }{{"10.0.0.1", "203.0.113.9"}, {"10.0.0.2", "10.0.0.2"}} {
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(tc.peer), Port: 4000}, nil)
		if got := p.Of(&ctx); got.String() != tc.want {
			t.Errorf("from %s: Of = %s, want %s", tc.peer, got, tc.want)
		}
	}
	var none Proxies
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 4000}, nil)
	if got := none.Of(&ctx); got.String() != "10.0.0.1" {
		t.Errorf("no trusted proxies: Of = %s, want the peer", got)
	}
}
