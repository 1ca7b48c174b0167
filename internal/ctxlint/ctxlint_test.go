package ctxlint

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCallsAreFound keeps the lint honest: it must see the calls it is meant to refuse, under any import
// name, and let the allowed function through.
func TestCallsAreFound(t *testing.T) {
	src := `package http
import stdctx "context"
func newLifetime() { _ = stdctx.Background() }
func (s *Server) handler() { _, _ = stdctx.WithTimeout(stdctx.Background(), 1) }
var root = stdctx.TODO()
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := Calls(f, fset, map[string]string{"newLifetime": "the root"})
	if len(got) != 2 || !strings.Contains(got[0], "(handler)") || !strings.Contains(got[1], "(package level)") {
		t.Fatalf("found %q, want the call in handler and the package-level one", got)
	}
}

// TestDirWalksSubpackagesAndSkipsTests: Dir finds a call in a subdirectory only when recursive, and never in
// a _test.go file.
func TestDirWalksSubpackagesAndSkipsTests(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.go", "package a\nimport \"context\"\nfunc ok(ctx context.Context) {}\n")
	write("a_test.go", "package a\nimport \"context\"\nvar _ = context.Background()\n")
	write("sub/b.go", "package sub\nimport \"context\"\nfunc run() { _ = context.TODO() }\n")
	found, files, err := Dir(dir, false, nil)
	if err != nil || files != 1 || len(found) != 0 {
		t.Fatalf("flat: found %q in %d files (%v), want nothing in 1 file", found, files, err)
	}
	found, files, err = Dir(dir, true, nil)
	if err != nil || files != 2 || len(found) != 1 || !strings.Contains(found[0], filepath.Join("sub", "b.go")+":3") {
		t.Fatalf("recursive: found %q in %d files (%v), want sub/b.go:3 in 2 files", found, files, err)
	}
}

// TestFieldUsesAreFound: FieldUses sees owner.field through any receiver and outside the allowed function,
// and not a field of the same name under another owner.
func TestFieldUsesAreFound(t *testing.T) {
	src := `package http
func (s *Server) serve() { _ = s.cfg.Logger }
func (s *Server) handler() { s.cfg.Logger.Error().Msg("x") }
func (c *Console) page() { l := c.cfg.Logger; _ = l; _ = c.other.Logger }
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := FieldUses(f, fset, "cfg", "Logger", map[string]string{"serve": "builds the request's logger"})
	if len(got) != 2 || !strings.Contains(got[0], "(handler)") || !strings.Contains(got[1], "(page)") {
		t.Fatalf("found %q, want the uses in handler and page", got)
	}
}
