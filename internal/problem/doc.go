package problem

import (
	_ "embed"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/template"
)

// docTemplate is docs/errors.md around its tables: the prose that is not one row per code.
//
//go:embed errors.md.tmpl
var docTemplate string

//go:generate go test -run TestErrorsDocMatchesTable -update .

// WriteDoc writes docs/errors.md: the template with the table's codes in use and its reserved codes.
func WriteDoc(w io.Writer) error {
	var inUse, reserved []Entry
	for _, e := range table {
		if e.Reserved != "" {
			reserved = append(reserved, e)
		} else {
			inUse = append(inUse, e)
		}
	}
	t, err := template.New("errors.md").Funcs(template.FuncMap{"codes": codeTable, "features": features}).
		Parse(docTemplate)
	if err != nil {
		return fmt.Errorf("parse errors.md.tmpl: %w", err)
	}
	if err := t.Execute(w, struct{ InUse, Reserved []Entry }{inUse, reserved}); err != nil {
		return fmt.Errorf("render errors.md: %w", err)
	}
	return nil
}

// codeTable renders entries as a Markdown table.
func codeTable(entries []Entry) string {
	var b strings.Builder
	b.WriteString("| code | status | title | job | retry | when |\n|---|---|---|---|---|---|\n")
	for _, e := range entries {
		fmt.Fprintf(&b, "| `%s` | %d | %s | %s | %s | %s |\n", e.Code, e.Status, e.Title, mark(e.Job, "job"),
			mark(e.Retry, "retry"), e.When)
	}
	return b.String()
}

func mark(set bool, word string) string {
	if set {
		return word
	}
	return ""
}

// features lists the features that reserved entries wait for.
func features(entries []Entry) string {
	seen := map[string]bool{}
	var names []string
	for _, e := range entries {
		if !seen[e.Reserved] {
			seen[e.Reserved] = true
			names = append(names, e.Reserved)
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
