// Package ctxlint finds calls of context.Background and context.TODO in Go source files, for the tests that
// keep request and actor paths on their caller's context: a blocking call on a background context outlives
// the request's deadline and the node's shutdown. It also finds uses of a field through its owner (a
// server's cfg.Logger), for the tests that keep handlers on what their request's context carries (its
// logger, which names the request). It owns the parsing and the allow list's form (function
// name -> reason); each package's test owns its allow list. It only parses files: it runs and imports
// nothing of the code it checks, and only tests import it.
package ctxlint

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Calls lists "file:line (function)" for each context.Background/TODO call in f outside the functions named
// in allowed, whatever name the file imports package context under. Calls at package level are reported as
// "(package level)".
func Calls(f *ast.File, fset *token.FileSet, allowed map[string]string) []string {
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
	return selectors(f, fset, allowed, func(sel *ast.SelectorExpr) bool {
		id, ok := sel.X.(*ast.Ident)
		return ok && id.Name == pkgName && (sel.Sel.Name == "Background" || sel.Sel.Name == "TODO")
	})
}

// selectors lists "file:line (function)" for each selector expression of f that match reports, outside the
// functions named in allowed (declarations outside any function count as "package level").
func selectors(f *ast.File, fset *token.FileSet, allowed map[string]string, match func(*ast.SelectorExpr) bool) []string {
	var found []string
	for _, decl := range f.Decls {
		fn := "package level"
		if fd, ok := decl.(*ast.FuncDecl); ok {
			fn = fd.Name.Name
			if _, ok := allowed[fn]; ok {
				continue
			}
		}
		ast.Inspect(decl, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && match(sel) {
				found = append(found, fset.Position(sel.Pos()).String()+" ("+fn+")")
			}
			return true
		})
	}
	return found
}

// FieldUses lists "file:line (function)" for each use of owner.field in f (cfg.Logger in s.cfg.Logger or
// c.cfg.Logger) outside the functions named in allowed.
func FieldUses(f *ast.File, fset *token.FileSet, owner, field string, allowed map[string]string) []string {
	return selectors(f, fset, allowed, func(sel *ast.SelectorExpr) bool {
		if sel.Sel.Name != field {
			return false
		}
		switch x := sel.X.(type) {
		case *ast.Ident:
			return x.Name == owner
		case *ast.SelectorExpr:
			return x.Sel.Name == owner
		}
		return false
	})
}

// DirFieldUses is FieldUses over the non-test .go files of dir, as Dir walks them.
func DirFieldUses(dir, owner, field string, allowed map[string]string) (found []string, files int, err error) {
	return walk(dir, false, func(f *ast.File, fset *token.FileSet) []string {
		return FieldUses(f, fset, owner, field, allowed)
	})
}

// Dir checks the non-test .go files of dir (and of its subdirectories when recursive) and returns the calls
// found, sorted, and how many files it parsed, so that a test can tell "clean" from "looked at nothing".
func Dir(dir string, recursive bool, allowed map[string]string) (found []string, files int, err error) {
	return walk(dir, recursive, func(f *ast.File, fset *token.FileSet) []string { return Calls(f, fset, allowed) })
}

func walk(dir string, recursive bool, check func(*ast.File, *token.FileSet) []string) (found []string, files int, err error) {
	fset := token.NewFileSet()
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != dir && (!recursive || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return fmt.Errorf("ctxlint: %w", err)
		}
		files++
		found = append(found, check(f, fset)...)
		return nil
	})
	sort.Strings(found)
	return found, files, err
}
