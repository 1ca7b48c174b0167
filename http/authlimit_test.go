package http

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	nethttp "net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"filigrane/actors"
	"filigrane/internal/authlimit"
	"filigrane/internal/clock"
	"filigrane/persistence/pebblestore"
	"filigrane/persistence/storetest"
)

// TestUnknownKeyLookupsInFlightAreBounded: lookups of unknown key ids from many clients cannot pile up on a
// slow store. With the bound's lookups held in the store, the next unknown key is answered 503 with
// Retry-After at once, without a read; once the store answers, the held ones get their 401 and lookups go on.
func TestUnknownKeyLookupsInFlightAreBounded(t *testing.T) {
	const bound = 2
	store, err := pebblestore.Open(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	// A store that has become slow (an S3 bucket under load), seen from the node: reads of API keys wait.
	held := storetest.NewHeld(store, func(k []byte) bool { return bytes.HasPrefix(k, []byte("apikey/")) }, 8)
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(held.Release) }) }
	defer release() // a failing test must not leave the server's handlers waiting
	clk := clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	// The request's own deadline is far away: only the bound may answer a lookup that the store holds.
	s := New(Config{Clock: clk, ActorTimeout: time.Minute, Keys: actors.Keys{Store: held, Clock: clk, Cache: actors.NewKeyCache(5 * time.Second),
		Limit: authlimit.New(authlimit.Config{MaxInFlight: bound}, clk)}})
	base := serveOnLoopback(t, s)
	client := &nethttp.Client{Timeout: 30 * time.Second}
	type answer struct {
		status     int
		retryAfter string
		code       string
	}
	getWith := func(client *nethttp.Client, path, key string) (answer, error) {
		req, err := nethttp.NewRequest("GET", base+path, nil)
		if err != nil {
			return answer{}, err
		}
		if key != "" {
			req.Header.Set("X-API-Key", key)
		}
		resp, err := client.Do(req)
		if err != nil {
			return answer{}, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var p struct{ Code string }
		_ = json.Unmarshal(b, &p)
		return answer{resp.StatusCode, resp.Header.Get("Retry-After"), p.Code}, nil
	}
	get := func(path, key string) (answer, error) { return getWith(client, path, key) }
	unknown := func(i int) string { return fmt.Sprintf("fgk_%016x_notasecret", i) }

	results := make(chan answer, bound)
	for i := range bound {
		go func() {
			a, err := get("/auth/api-key", unknown(i))
			if err != nil {
				t.Error(err)
			}
			results <- a
		}()
	}
	for range bound {
		<-held.Entered
	}
	// Answered at once: a lookup that waited for a slot would wait for the held ones (a minute).
	a, err := getWith(&nethttp.Client{Timeout: 5 * time.Second}, "/auth/api-key", unknown(bound))
	if err != nil {
		t.Fatalf("the lookup past the bound was not answered while the others were held: %v", err)
	}
	if a.status != 503 || a.code != "service_unavailable" || a.retryAfter != "1" {
		t.Fatalf("the lookup past the bound: %+v, want 503 service_unavailable with Retry-After 1", a)
	}
	if n := held.Reads.Load(); n != bound {
		t.Fatalf("the store saw %d reads, want %d", n, bound)
	}
	release()
	for range bound {
		if a := <-results; a.status != 401 || a.code != "unauthorized" {
			t.Fatalf("a held lookup: %+v, want 401 unauthorized", a)
		}
	}
	if a, err := get("/auth/api-key", unknown(bound)); err != nil || a.status != 401 {
		t.Fatalf("the refused key once the slots are free: %+v %v, want 401", a, err)
	}
	m, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(m.Body)
	m.Body.Close()
	for _, want := range []string{`filigrane_auth_refused_total{reason="lookups_busy"} 1`,
		fmt.Sprintf(`filigrane_auth_refused_total{reason="invalid_key"} %d`, bound+1)} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("/metrics lacks %s", want)
		}
	}
}
