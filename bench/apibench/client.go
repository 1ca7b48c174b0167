package apibench

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// NormalizeTargets checks that every target is an http or https base URL and trims its spaces and trailing
// slashes in place, so that paths can be appended to it. The load harness (bench/loadbench) takes its targets
// the same way.
func NormalizeTargets(targets []string) error {
	for i, t := range targets {
		t = strings.TrimRight(strings.TrimSpace(t), "/")
		u, err := url.Parse(t)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("target %q: want a base URL like http://127.0.0.1:8080", t)
		}
		targets[i] = t
	}
	return nil
}

// NewClient returns the HTTP client a benchmark sends its requests with: name is its User-Agent, conns bounds
// its connections per node, and timeout bounds the reading and the writing of one request (fasthttp takes no
// context). Paths are sent as given, so that a benchmark times the server's answer to exactly that path.
func NewClient(name string, conns int, timeout time.Duration) *fasthttp.Client {
	return &fasthttp.Client{
		Name:                   name,
		MaxConnsPerHost:        conns,
		ReadTimeout:            timeout,
		WriteTimeout:           timeout,
		MaxIdleConnDuration:    time.Minute,
		DisablePathNormalizing: true,
	}
}
