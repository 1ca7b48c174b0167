package apicheck

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

const (
	docPath    = "../../../docs/api.md"
	beginTable = "<!-- routes: generated from internal/apispec/openapi.yaml -->\n"
	endTable   = "<!-- end routes -->\n"
)

// routeTable renders the document's operations as the Markdown table of docs/api.md.
func routeTable(c *Checker) string {
	var b strings.Builder
	b.WriteString("| Method | Path | Summary | Key | Error codes besides the common ones |\n|---|---|---|---|---|\n")
	for _, op := range c.Operations() {
		summary, _ := op.node["summary"].(string)
		key := "no"
		if c.authenticated(&op) {
			key = "yes"
		}
		codes := c.OwnProblemCodes(&op)
		for i := range codes {
			codes[i] = "`" + codes[i] + "`"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %s |\n", op.Method, op.Path, summary, key, strings.Join(codes, ", "))
	}
	return b.String()
}

// TestAPIDocMatchesOpenAPI: docs/api.md's route table is the one the document renders
// (FILIGRANE_UPDATE_API_DOC=1 rewrites it).
func TestAPIDocMatchesOpenAPI(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, beginTable), strings.Index(s, endTable)
	if i < 0 || j < i {
		t.Fatalf("docs/api.md lacks the route table markers")
	}
	want := s[:i+len(beginTable)] + routeTable(c) + s[j:]
	if want == s {
		return
	}
	if os.Getenv("FILIGRANE_UPDATE_API_DOC") == "1" {
		if err := os.WriteFile(docPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("docs/api.md's route table differs from internal/apispec/openapi.yaml; run FILIGRANE_UPDATE_API_DOC=1 go test ./internal/apispec/apicheck")
}
