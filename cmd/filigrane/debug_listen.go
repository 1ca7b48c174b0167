package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/rs/zerolog"
)

// startDebugListener serves Go's runtime profiles (/debug/pprof/...) on addr, a listener of its own so that
// the API never exposes them: an operator profiles a node under load (`go tool pprof
// http://ADDR/debug/pprof/profile?seconds=20`) without a rebuild. It has no authentication: bind it to
// loopback or a private interface. The server stops when ctx ends.
func startDebugListener(ctx context.Context, addr string, logger zerolog.Logger) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	mux := http.NewServeMux()
	// Registered by hand on a private mux: importing net/http/pprof for its side effect would put the
	// handlers on http.DefaultServeMux, a process-wide global.
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error().Err(err).Msg("debug listener stopped")
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return ln.Addr().String(), nil
}
