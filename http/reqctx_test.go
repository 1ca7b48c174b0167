package http

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// backgroundAllowed names the functions of package http that may call context.Background or context.TODO,
// each with the reason. Everything else runs on behalf of a request and takes its context from
// Server.requestContext, so that a request's blocking calls end with its deadline and the server's shutdown.
var backgroundAllowed = map[string]string{
	"newLifetime": "the root of a server's request contexts: it is created with the server, before any request",
}

// TestNoBackgroundContextInHandlers parses the package's sources and fails on every context.Background or
// context.TODO outside backgroundAllowed.
func TestNoBackgroundContextInHandlers(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, bad := range backgroundCalls(f, fset) {
			t.Errorf("%s: a request's blocking calls take Server.requestContext, not a background context", bad)
		}
	}
	if checked < 10 {
		t.Fatalf("only %d source files parsed; is the test running in the package directory?", checked)
	}
}

// backgroundCalls lists "file:line (function)" for each context.Background/TODO call outside an allowed
// function, whatever name the file imports package context under.
func backgroundCalls(f *ast.File, fset *token.FileSet) []string {
	pkgName := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "context" {
			pkgName = "context"
			if imp.Name != nil {
				pkgName = imp.Name.Name
			}
		}
	}
	if pkgName == "" {
		return nil
	}
	var found []string
	report := func(fn string, n ast.Node) {
		found = append(found, fset.Position(n.Pos()).String()+" ("+fn+")")
	}
	for _, decl := range f.Decls {
		fn := "package level"
		if fd, ok := decl.(*ast.FuncDecl); ok {
			fn = fd.Name.Name
			if _, ok := backgroundAllowed[fn]; ok {
				continue
			}
		}
		ast.Inspect(decl, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == pkgName && (sel.Sel.Name == "Background" || sel.Sel.Name == "TODO") {
				report(fn, sel)
			}
			return true
		})
	}
	return found
}

// TestBackgroundCallsAreFound keeps the lint honest: it must see the calls it is meant to refuse, under any
// import name, and let the allowed function through.
func TestBackgroundCallsAreFound(t *testing.T) {
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
	got := backgroundCalls(f, fset)
	if len(got) != 2 || !strings.Contains(got[0], "(handler)") || !strings.Contains(got[1], "(package level)") {
		t.Fatalf("found %q, want the call in handler and the package-level one", got)
	}
}

// TestShutdownEndsRequestContexts: a request still running when Shutdown has waited its grace sees its
// context cancelled; one made before Shutdown keeps its own deadline until then.
func TestShutdownEndsRequestContexts(t *testing.T) {
	s := New(Config{})
	c, cancel := s.requestContext(time.Hour)
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
