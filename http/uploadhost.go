package http

import (
	"time"

	"github.com/valyala/fasthttp"
)

// NewUploadHost builds the listener for signed upload URLs. It takes no API key: each URL carries its own
// signature. Until signed uploads exist (issue 6) it answers health checks and 404 problems.
func NewUploadHost(cfg Config) *Server {
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = 16 << 10
	}
	s := &Server{cfg: cfg}
	s.router.handle("GET", "/healthz", func(ctx *fasthttp.RequestCtx, _ map[string]string) {
		writeJSON(ctx, 200, map[string]string{"status": "ok"})
	})
	s.srv = &fasthttp.Server{
		Handler: s.serve, ErrorHandler: s.serveParseError, Name: "filigrane-upload",
		ReadBufferSize: cfg.MaxHeaderBytes, ReadTimeout: 30 * time.Minute, WriteTimeout: time.Minute,
		IdleTimeout: 2 * time.Minute, NoDefaultContentType: true, CloseOnShutdown: true,
		Logger: fasthttpLogger{cfg.Logger},
	}
	return s
}
