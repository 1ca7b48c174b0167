package console

import (
	"testing"

	"filigrane/internal/ctxlint"
)

// TestConsoleLogsWithTheRequestID parses the package's sources and fails on every use of cfg.Logger but the
// fallback of Console.log: a page's line written through Config.Logger would not carry the request's id.
func TestConsoleLogsWithTheRequestID(t *testing.T) {
	found, checked, err := ctxlint.DirFieldUses(".", "cfg", "Logger", map[string]string{"log": "the fallback for a context of no request"})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 3 {
		t.Fatalf("only %d source files parsed; is the test running in the package directory?", checked)
	}
	for _, bad := range found {
		t.Errorf("%s: a console request's lines go through Console.log (they name the request), not Config.Logger", bad)
	}
}
