// Package loglines gives tests a logger's output as lines on a channel, so that a test waits for what the code
// under test says it did (a decision taken in a message or a goroutine the test cannot observe otherwise) instead
// of sleeping. It is for tests only; it decides nothing and keeps no lines nobody waits for.
package loglines

import (
	"strings"
	"testing"
	"time"
)

// Lines is an io.Writer for a logger: each write is a line, offered to a waiting test and dropped when nobody
// waits and the buffer is full (a logger must never block on a test).
type Lines chan string

// New returns Lines that keep up to buffer lines nobody has read yet.
func New(buffer int) Lines { return make(Lines, buffer) }

func (l Lines) Write(p []byte) (int, error) {
	select {
	case l <- string(p):
	default: // nobody waits for this one
	}
	return len(p), nil
}

// Wait waits up to timeout for a line containing want, and fails the test without one.
func (l Lines) Wait(t testing.TB, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case line := <-l:
			if strings.Contains(line, want) {
				return
			}
		case <-deadline:
			t.Fatalf("no log line saying %q within %v", want, timeout)
		}
	}
}
