package http

import (
	"context"
	"errors"
	"testing"
	"time"

	"filigrane/internal/ctxlint"
)

// backgroundAllowed names the functions of package http that may call context.Background or context.TODO,
// each with the reason. Everything else runs on behalf of a request and takes its context from
// Server.requestContext, so that a request's blocking calls end with its deadline and the server's shutdown.
var backgroundAllowed = map[string]string{
	"newLifetime": "the root of a server's request contexts: it is created with the server, before any request",
}

// TestNoBackgroundContextInHandlers parses the package's sources and fails on every context.Background or
// context.TODO outside backgroundAllowed (internal/ctxlint; its own test checks that it finds them).
func TestNoBackgroundContextInHandlers(t *testing.T) {
	found, checked, err := ctxlint.Dir(".", false, backgroundAllowed)
	if err != nil {
		t.Fatal(err)
	}
	if checked < 10 {
		t.Fatalf("only %d source files parsed; is the test running in the package directory?", checked)
	}
	for _, bad := range found {
		t.Errorf("%s: a request's blocking calls take Server.requestContext, not a background context", bad)
	}
}

// TestShutdownEndsRequestContexts: a request still running when Shutdown has waited its grace sees its
// context cancelled; one made before Shutdown keeps its own deadline until then.
func TestShutdownEndsRequestContexts(t *testing.T) {
	s := New(Config{})
	c, cancel := s.requestContext(nil, time.Hour)
	defer cancel()
	if dl, ok := c.Deadline(); !ok || time.Until(dl) < 59*time.Minute {
		t.Fatalf("request context deadline %v %v, want about an hour", dl, ok)
	}
	if c.Err() != nil {
		t.Fatalf("request context ended before shutdown: %v", c.Err())
	}
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := s.Shutdown(sctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("the request context is still live after Shutdown returned")
	}
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("request context error %v, want canceled", c.Err())
	}
}
