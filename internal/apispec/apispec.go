// Package apispec owns the API's one wire schema: the OpenAPI 3.1 document openapi.yaml, embedded in the
// binary and served by the HTTP layer at GET /openapi.yaml and, converted once, GET /openapi.json.
//
// The document is written by hand next to the handlers it describes; it is kept true by tests, not by
// generation: apicheck validates every response the HTTP tests see against it, a test walks the router's
// routes and fails on one the document lacks, and the route table of docs/api.md is rendered from it (FILIGRANE_UPDATE_API_DOC=1 go test ./internal/apispec/apicheck). It must
// not import the HTTP layer or any actor: it is data.
package apispec

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"go.yaml.in/yaml/v3"
)

//go:embed openapi.yaml
var openAPIYAML []byte

// YAML returns the document as written (callers must not change the slice).
func YAML() []byte { return openAPIYAML }

// toJSON is the JSON form, converted on first use and then only read.
var toJSON = sync.OnceValues(func() ([]byte, error) { return YAMLToJSON(openAPIYAML) })

// JSON returns the document as JSON, keys in the YAML's order (callers must not change the slice).
func JSON() ([]byte, error) { return toJSON() }

// YAMLToJSON converts one YAML document to indented JSON, keeping the order of mapping keys and resolving
// anchors and aliases. Only what JSON can hold is accepted: mapping keys must be scalars.
func YAMLToJSON(src []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("parse the OpenAPI YAML: %w", err)
	}
	var b bytes.Buffer
	if err := writeNode(&b, &doc, 0); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		return nil, fmt.Errorf("convert the OpenAPI YAML: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// maxDepth bounds alias expansion: the document is ours, but a cycle must fail, not recurse forever.
const maxDepth = 64

func writeNode(b *bytes.Buffer, n *yaml.Node, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("line %d: nesting deeper than %d (an alias cycle?)", n.Line, maxDepth)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return fmt.Errorf("expected one YAML document, got %d", len(n.Content))
		}
		return writeNode(b, n.Content[0], depth+1)
	case yaml.AliasNode:
		return writeNode(b, n.Alias, depth+1)
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: mapping keys must be scalars", k.Line)
			}
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k.Value)
			b.WriteByte(':')
			if err := writeNode(b, v, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeNode(b, c, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		return writeScalar(b, n)
	default:
		return fmt.Errorf("line %d: unexpected YAML node", n.Line)
	}
	return nil
}

func writeScalar(b *bytes.Buffer, n *yaml.Node) error {
	switch n.ShortTag() {
	case "!!null":
		b.WriteString("null")
	case "!!bool":
		var v bool
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		b.WriteString(strconv.FormatBool(v))
	case "!!int", "!!float":
		var v any
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		num, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("line %d: %q is not a JSON number", n.Line, n.Value)
		}
		b.Write(num)
	default:
		writeString(b, n.Value)
	}
	return nil
}

func writeString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s) // a string always encodes
	b.Write(enc)
}
