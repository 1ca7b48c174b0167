package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"unicode/utf8"
)

// decodeObject decodes the JSON object of a small request body into v, refusing members v does not name. It
// answers with the error table's split (internal/problem): a body that is not JSON at all, or holds more than
// one value, is 400 malformed_json; valid JSON that does not fit (not an object, a member of the wrong type,
// an unknown member) is 422 invalid_request and names the member, in words rather than Go's (no struct or
// type names). shape is the expected object, e.g. `{"webhook_id": "wh_..."}`, quoted in the detail.
func decodeObject(raw []byte, v any, shape string) *apiError {
	if !utf8.Valid(raw) || !json.Valid(raw) {
		return newAPIError(CodeMalformedJSON, "the body is not valid JSON; send %s", shape)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		return nil
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		if typ.Field == "" {
			return newAPIError(CodeInvalidRequest, "the body must be a JSON object: send %s", shape)
		}
		return newAPIError(CodeInvalidRequest, "%s must be %s, not %s", typ.Field, jsonKind(typ.Type), valueKind(typ.Value))
	}
	// DisallowUnknownFields reports `json: unknown field "x"`; any other decoding error of valid JSON is a
	// value that does not fit too.
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if strings.HasPrefix(msg, "unknown field ") {
		return newAPIError(CodeInvalidRequest, "%s; send %s and no other member", strings.Replace(msg, "field", "member", 1), shape)
	}
	return newAPIError(CodeInvalidRequest, "the body does not fit %s: %s", shape, msg)
}

// jsonKind names the JSON type a Go type is decoded from, with its article.
func jsonKind(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "a JSON value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "a JSON value"
}

// valueKind names, with its article, the JSON value encoding/json reports ("number", "string", "array",
// "object", "bool", "number 1.5").
func valueKind(kind string) string {
	if kind == "bool" {
		kind = "boolean"
	}
	return article(kind) + " " + kind
}
