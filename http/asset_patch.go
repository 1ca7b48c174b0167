package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"filigrane/actors"
	"filigrane/internal/hiddenchar"
)

// Limits of an asset edit (spec 8).
const (
	maxAssetBodyBytes   = 64 << 10 // PATCH and bulk-delete bodies
	maxAssetNameRunes   = 200
	maxMetadataBytes    = 8 << 10 // the metadata object, measured compacted (whitespace is not the caller's data)
	maxMetadataDepth    = 8       // the metadata object itself is level 1; every nested object or array adds one
	maxMetadataKeyRunes = 100
)

// errMetadata marks a semantic problem found while walking metadata (the syntax was checked before).
type errMetadata struct{ msg string }

func (e *errMetadata) Error() string { return e.msg }

func metaErr(format string, args ...any) error {
	return &errMetadata{msg: fmt.Sprintf(format, args...)}
}

// parseAssetPatch validates a PATCH /assets/{id} body: {version, name?, metadata?}. Syntax errors (and bodies
// that are not UTF-8) are 400 malformed_json; everything else that breaks a rule is 422. It never trusts the
// decoder's leniency: duplicate members are refused (which of two values would count is ambiguous), numbers are
// read from their literal so that integers outside int64 are not silently rounded through float64.
func parseAssetPatch(body []byte) (actors.AssetPatch, *apiError) {
	var p actors.AssetPatch
	if !utf8.Valid(body) || !json.Valid(body) {
		return p, newAPIError(CodeMalformedJSON, "the body is not valid UTF-8 JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return p, newAPIError(CodeMalformedJSON, "the body is not valid JSON")
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return p, newAPIError(CodeInvalidRequest, "the body must be a JSON object {version, name?, metadata?}")
	}
	seen := map[string]bool{}
	hasVersion := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return p, newAPIError(CodeMalformedJSON, "the body is not valid JSON")
		}
		field, _ := tok.(string)
		if seen[field] {
			return p, newAPIError(CodeInvalidRequest, "the field %q appears twice", truncate(field, 100))
		}
		seen[field] = true
		switch field {
		case "version":
			// Raw, since decoding into json.Number would also take the string "1".
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return p, newAPIError(CodeMalformedJSON, "the body is not valid JSON")
			}
			v, err := strconv.ParseInt(string(raw), 10, 64)
			if err != nil || v < 1 {
				return p, newAPIError(CodeInvalidRequest, "version must be a positive integer")
			}
			p.Version, hasVersion = v, true
		case "name":
			var name *string
			if err := dec.Decode(&name); err != nil || name == nil {
				return p, newAPIError(CodeInvalidRequest, "name must be a string")
			}
			if msg := checkAssetName(*name); msg != "" {
				return p, newAPIError(CodeInvalidRequest, "%s", msg)
			}
			p.Name = name
		case "metadata":
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return p, newAPIError(CodeMalformedJSON, "the body is not valid JSON")
			}
			meta, err := parseMetadata(raw)
			if err != nil {
				return p, newAPIError(CodeInvalidRequest, "%v", err)
			}
			p.Metadata, p.SetMetadata = meta, true
		default:
			return p, newAPIError(CodeInvalidRequest, "unknown field %q; send version, name and metadata only", truncate(field, 100))
		}
	}
	if !hasVersion {
		return p, newAPIError(CodeInvalidRequest, "version is required: send the asset's current version")
	}
	if p.Name == nil && !p.SetMetadata {
		return p, newAPIError(CodeInvalidRequest, "send name, metadata or both")
	}
	return p, nil
}

// checkAssetName returns why name is not 1 to 200 printable characters (spec 8), or "". Printable is
// unicode.IsPrint: it refuses every character internal/hiddenchar hides in a name (the detail names one in its
// words, as every other refused name does), and also the joiners and spaces other than U+0020, which names
// elsewhere keep; the spec fixes this rule, so it stays the stricter one.
func checkAssetName(name string) string {
	n := utf8.RuneCountInString(name)
	if n < 1 || n > maxAssetNameRunes {
		return fmt.Sprintf("name must be 1 to %d characters (got %d)", maxAssetNameRunes, n)
	}
	for _, r := range name {
		if hiddenchar.Hidden(r) {
			return fmt.Sprintf("name holds %s; names are printable characters only", hiddenchar.Describe(r))
		}
		if !unicode.IsPrint(r) || r == utf8.RuneError {
			return fmt.Sprintf("name must contain printable characters only (found %U)", r)
		}
	}
	return ""
}

// parseMetadata validates a metadata value (spec 8): a JSON object of at most 8 KB and eight nesting levels,
// keys of 1 to 100 characters without dots, NUL or a leading '$' at every level, numbers finite and integers
// within int64. It returns the object with integers as int64 and other numbers as float64.
func parseMetadata(raw json.RawMessage) (map[string]any, error) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, metaErr("metadata is not valid JSON")
	}
	if compact.Len() > maxMetadataBytes {
		return nil, metaErr("metadata is %d bytes; at most %d are allowed", compact.Len(), maxMetadataBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(compact.Bytes()))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, metaErr("metadata is not valid JSON")
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, metaErr("metadata must be a JSON object")
	}
	m, err := metadataObject(dec, 1, "metadata")
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, metaErr("metadata is not a single JSON value")
	}
	return m, nil
}

// metadataObject reads the members of an object whose '{' was consumed, at nesting level depth.
func metadataObject(dec *json.Decoder, depth int, path string) (map[string]any, error) {
	m := map[string]any{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, metaErr("metadata is not valid JSON")
		}
		key, _ := tok.(string)
		if msg := checkMetadataKey(key); msg != "" {
			return nil, metaErr("%s: key %q %s", path, truncate(key, 100), msg)
		}
		if _, dup := m[key]; dup {
			return nil, metaErr("%s: key %q appears twice", path, truncate(key, 100))
		}
		v, err := metadataValue(dec, depth, path+"."+key)
		if err != nil {
			return nil, err
		}
		m[key] = v
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, metaErr("metadata is not valid JSON")
	}
	return m, nil
}

func checkMetadataKey(key string) string {
	switch n := utf8.RuneCountInString(key); {
	case n < 1 || n > maxMetadataKeyRunes:
		return fmt.Sprintf("must be 1 to %d characters", maxMetadataKeyRunes)
	case strings.ContainsRune(key, '.'):
		return "must not contain dots"
	case strings.ContainsRune(key, 0):
		return "must not contain NUL characters"
	case strings.HasPrefix(key, "$"):
		return "must not start with '$'"
	}
	return ""
}

// metadataValue reads one value inside a container at nesting level depth.
func metadataValue(dec *json.Decoder, depth int, path string) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, metaErr("metadata is not valid JSON")
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth+1 > maxMetadataDepth {
			return nil, metaErr("%s: metadata nests deeper than %d levels", path, maxMetadataDepth)
		}
		if t == '{' {
			return metadataObject(dec, depth+1, path)
		}
		arr := []any{}
		for i := 0; dec.More(); i++ {
			v, err := metadataValue(dec, depth+1, path+"["+strconv.Itoa(i)+"]")
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		if _, err := dec.Token(); err != nil { // the closing ']'
			return nil, metaErr("metadata is not valid JSON")
		}
		return arr, nil
	case json.Number:
		return metadataNumber(string(t), path)
	case string, bool, nil:
		return t, nil
	}
	return nil, metaErr("%s: unexpected JSON token", path)
}

// metadataNumber reads a number literal: one without fraction or exponent is an integer and must fit int64;
// any other must be finite as a float64 (1e400 is not).
func metadataNumber(lit, path string) (any, error) {
	if !strings.ContainsAny(lit, ".eE") {
		v, err := strconv.ParseInt(lit, 10, 64)
		if err != nil {
			return nil, metaErr("%s: the integer %s does not fit in signed 64 bits", path, truncate(lit, 40))
		}
		return v, nil
	}
	v, err := strconv.ParseFloat(lit, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil, metaErr("%s: %s is not a number", path, truncate(lit, 40))
	}
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return nil, metaErr("%s: the number %s is not finite", path, truncate(lit, 40))
	}
	return v, nil
}
