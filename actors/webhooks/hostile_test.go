package webhooks

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"filigrane/actors/outbox"
	"filigrane/internal/clock"
	"filigrane/internal/egress"
	"filigrane/internal/hiddenchar"
)

// TestHostileReceiverErrorIsEscapedAndBounded: a receiver whose TLS certificate names (which Go's hostname
// error quotes as they are) hold terminal escape sequences, an OSC 52 clipboard write and a screen clear, and
// add up to over 100 KB leaves an attempt error of at most hiddenchar.RemoteLimit bytes, valid UTF-8, with no
// ESC or BEL byte: the delivery log (API, `filigrane webhooks deliveries`, console) shows them escaped.
func TestHostileReceiverErrorIsEscapedAndBounded(t *testing.T) {
	ctx := context.Background()
	const hostile = "\x1b]52;c;cm0gLXJmIH4=\a\x1b[2J"
	names := make([]string, 90) // Go quotes at most 99
	for i := range names {
		names[i] = hostile + strings.Repeat("a", 1200) + ".example"
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is the point
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{selfSigned(t, names)}}
	srv.StartTLS()
	defer srv.Close()

	clk := clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	store := openStore(t)
	eps := Endpoints{Store: store, Clock: clk}
	ep, err := eps.Create(ctx, "org_a", Spec{URL: "https://localhost:" + srv.URL[strings.LastIndexByte(srv.URL, ':')+1:] + "/in"})
	if err != nil {
		t.Fatal(err)
	}
	reg := outbox.NewRegistry()
	RegisterHandlers(reg, store, &Deliverer{Endpoints: eps, Sender: NewSender(&egress.Guard{AllowPrivate: true}, 5*time.Second), Clock: clk})
	ready := "2026-06-01T10:00:00Z"
	e, err := AcceleratorReadyEffect("org_a", ep.ID, AcceleratorReady{ID: "wake_1", Accelerator: "gpu", Status: "ready", ReadyAt: &ready}, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	box := outbox.Outbox{Store: store, Clock: clk}
	if err := box.Add(ctx, e); err != nil {
		t.Fatal(err)
	}
	if res, err := (outbox.Deliverer{Outbox: box, Registry: reg, Logger: zerolog.Nop()}).Pass(ctx); err != nil || res.Failed != 1 {
		t.Fatalf("pass: %+v %v, want one failed attempt", res, err)
	}
	ent, err := box.Get(ctx, e.ID)
	if err != nil || len(ent.Attempts) != 1 {
		t.Fatalf("entry %+v %v", ent, err)
	}
	got := ent.Attempts[0].Error
	if len(got) > hiddenchar.RemoteLimit || !utf8.ValidString(got) || strings.ContainsAny(got, "\x1b\a") ||
		!strings.Contains(got, `certificate is valid for \u001b]52;c;cm0gLXJmIH4=\u0007\u001b[2J`) {
		t.Fatalf("stored attempt error of %d bytes: %+q", len(got), got[:min(len(got), 300)])
	}
}

// selfSigned is a certificate for names (no IP address, so a client reaching it as localhost quotes them).
func selfSigned(t *testing.T, names []string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hostile"}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
