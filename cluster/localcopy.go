package cluster

import (
	"encoding"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// A reply to a caller on the same node does not need to cross a wire, but it must still not share memory
// with the actor that sent it: an actor answers with pointers into its own state (a job actor replies with
// its record) and goes on changing that state after the reply. Encoding and decoding the reply gave that
// isolation at the price of about a quarter of the CPU of a status GET (msgpack is reflection-driven and
// allocates per field). A local reply is instead deep-copied with a per-type plan that reproduces what a
// msgpack round trip through Wrap and Unwrap yields: exported fields only, "-" and omitempty honoured, nil
// and empty slices and maps kept apart as the decoder keeps them, times as time.Unix(sec, nsec) (local
// zone, no monotonic reading; the zero time stays zero). A type the plan cannot mirror exactly (an interface, a function or a
// channel anywhere inside, or a custom msgpack or binary/text marshaller other than time.Time's) is not
// copyable and goes through the envelope as before. TestLocalCopyMatchesEnvelope (package actors) checks
// the equivalence for every registered message type.

// copyFunc copies src into dst, a settable zero value of the same type.
type copyFunc func(dst, src reflect.Value)

// copyPlan is a type's copier, or nil when the type must travel as an envelope.
type copyPlan struct{ copy copyFunc }

// localCopier caches one plan per type.
type localCopier struct {
	plans sync.Map // reflect.Type -> *copyPlan
}

var (
	timeType             = reflect.TypeOf(time.Time{})
	customEncoderType    = reflect.TypeOf((*msgpack.CustomEncoder)(nil)).Elem()
	customDecoderType    = reflect.TypeOf((*msgpack.CustomDecoder)(nil)).Elem()
	marshalerType        = reflect.TypeOf((*msgpack.Marshaler)(nil)).Elem()
	unmarshalerType      = reflect.TypeOf((*msgpack.Unmarshaler)(nil)).Elem()
	binaryMarshalerType  = reflect.TypeOf((*encoding.BinaryMarshaler)(nil)).Elem()
	textMarshalerType    = reflect.TypeOf((*encoding.TextMarshaler)(nil)).Elem()
	binaryUnmarshalType  = reflect.TypeOf((*encoding.BinaryUnmarshaler)(nil)).Elem()
	textUnmarshalType    = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
	isZeroerType         = reflect.TypeOf((*interface{ IsZero() bool })(nil)).Elem()
	customisedMsgpackTys = []reflect.Type{customEncoderType, customDecoderType, marshalerType, unmarshalerType,
		binaryMarshalerType, textMarshalerType, binaryUnmarshalType, textUnmarshalType}
)

// LocalCopy returns a pointer to a deep copy of v (a registered value or a pointer to one) equal to what
// Unwrap(Wrap(v)) returns, or false when v's type cannot be copied that way (see the comment above).
func (r *Registry) LocalCopy(v any) (any, bool) {
	rv := reflect.ValueOf(v)
	for rv.IsValid() && rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil, false
		}
		rv = rv.Elem()
	}
	if !rv.IsValid() {
		return nil, false
	}
	if _, ok := r.Name(rv.Interface()); !ok {
		return nil, false
	}
	fn := r.copier.plan(rv.Type())
	if fn == nil {
		return nil, false
	}
	out := reflect.New(rv.Type())
	fn(out.Elem(), rv)
	return out.Interface(), true
}

func (c *localCopier) plan(t reflect.Type) copyFunc {
	if p, ok := c.plans.Load(t); ok {
		return p.(*copyPlan).copy
	}
	fn := buildCopy(t, map[reflect.Type]*copyFunc{})
	p, _ := c.plans.LoadOrStore(t, &copyPlan{copy: fn})
	return p.(*copyPlan).copy
}

// buildCopy returns t's copier or nil. inProgress breaks recursion through recursive types: a type met again
// while its plan is being built is copied through a pointer filled in when the build finishes.
func buildCopy(t reflect.Type, inProgress map[reflect.Type]*copyFunc) copyFunc {
	if slot, ok := inProgress[t]; ok {
		return func(dst, src reflect.Value) { (*slot)(dst, src) }
	}
	if t == timeType {
		return func(dst, src reflect.Value) {
			tm := src.Interface().(time.Time)
			if tm.IsZero() {
				return // encoded as nil, decoded as the zero time
			}
			dst.Set(reflect.ValueOf(time.Unix(tm.Unix(), int64(tm.Nanosecond()))))
		}
	}
	for _, it := range customisedMsgpackTys {
		if t.Implements(it) || reflect.PointerTo(t).Implements(it) {
			return nil
		}
	}
	slot := new(copyFunc)
	inProgress[t] = slot
	defer delete(inProgress, t)
	var fn copyFunc
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.String:
		fn = func(dst, src reflect.Value) { dst.Set(src) }
	case reflect.Array:
		elem := buildCopy(t.Elem(), inProgress)
		if elem == nil {
			return nil
		}
		fn = func(dst, src reflect.Value) {
			for i := range src.Len() {
				elem(dst.Index(i), src.Index(i))
			}
		}
	case reflect.Slice:
		elem := buildCopy(t.Elem(), inProgress)
		if elem == nil {
			return nil
		}
		fn = func(dst, src reflect.Value) {
			if src.IsNil() {
				return
			}
			n := src.Len()
			s := reflect.MakeSlice(t, n, n)
			for i := range n {
				elem(s.Index(i), src.Index(i))
			}
			dst.Set(s)
		}
	case reflect.Map:
		key, elem := buildCopy(t.Key(), inProgress), buildCopy(t.Elem(), inProgress)
		if key == nil || elem == nil {
			return nil
		}
		fn = func(dst, src reflect.Value) {
			if src.IsNil() {
				return
			}
			m := reflect.MakeMapWithSize(t, src.Len())
			it := src.MapRange()
			for it.Next() {
				k, v := reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem()
				key(k, it.Key())
				elem(v, it.Value())
				m.SetMapIndex(k, v)
			}
			dst.Set(m)
		}
	case reflect.Pointer:
		elem := buildCopy(t.Elem(), inProgress)
		if elem == nil {
			return nil
		}
		fn = func(dst, src reflect.Value) {
			if src.IsNil() {
				return
			}
			p := reflect.New(t.Elem())
			elem(p.Elem(), src.Elem())
			dst.Set(p)
		}
	case reflect.Struct:
		fn = buildStructCopy(t, inProgress)
		if fn == nil {
			return nil
		}
	default: // interfaces, functions, channels, unsafe pointers, complex numbers
		return nil
	}
	*slot = fn
	return fn
}

// structField is one field the msgpack encoder writes.
type structField struct {
	index     int
	omitEmpty bool
	copy      copyFunc
	isEmpty   func(reflect.Value) bool
}

func buildStructCopy(t reflect.Type, inProgress map[reflect.Type]*copyFunc) copyFunc {
	var fields []structField
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			if f.Anonymous {
				return nil // an embedded unexported struct's exported fields would be encoded: not mirrored
			}
			continue
		}
		tag := f.Tag.Get("msgpack")
		if tag == "-" {
			continue
		}
		opts := ""
		if _, after, ok := strings.Cut(tag, ","); ok {
			opts = after
		}
		if hasOption(opts, "inline") || hasOption(opts, "as_array") {
			return nil
		}
		c := buildCopy(f.Type, inProgress)
		if c == nil {
			return nil
		}
		sf := structField{index: i, copy: c}
		if hasOption(opts, "omitempty") {
			sf.omitEmpty = true
			sf.isEmpty = emptyTest(f.Type)
			if sf.isEmpty == nil {
				return nil
			}
		}
		fields = append(fields, sf)
	}
	return func(dst, src reflect.Value) {
		for _, f := range fields {
			sv := src.Field(f.index)
			if f.omitEmpty && f.isEmpty(sv) {
				continue
			}
			f.copy(dst.Field(f.index), sv)
		}
	}
}

func hasOption(opts, name string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == name {
			return true
		}
	}
	return false
}

// emptyTest mirrors msgpack's test for omitempty (its Encoder.isEmptyValue): a type with IsZero() uses it,
// lengths for arrays, maps, slices and strings, zero for numbers and booleans, nil for pointers, and a
// struct is empty when every field it would write is itself omitted.
func emptyTest(t reflect.Type) func(reflect.Value) bool {
	if t.Implements(isZeroerType) {
		return func(v reflect.Value) bool {
			if (t.Kind() == reflect.Pointer || t.Kind() == reflect.Map || t.Kind() == reflect.Slice) && v.IsNil() {
				return true
			}
			return v.Interface().(interface{ IsZero() bool }).IsZero()
		}
	}
	switch t.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return func(v reflect.Value) bool { return v.Len() == 0 }
	case reflect.Bool:
		return func(v reflect.Value) bool { return !v.Bool() }
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return func(v reflect.Value) bool { return v.Int() == 0 }
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return func(v reflect.Value) bool { return v.Uint() == 0 }
	case reflect.Float32, reflect.Float64:
		return func(v reflect.Value) bool { return v.Float() == 0 }
	case reflect.Pointer:
		return func(v reflect.Value) bool { return v.IsNil() }
	case reflect.Struct:
		var tests []func(reflect.Value) bool
		var idx []int
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("msgpack") == "-" {
				continue
			}
			_, opts, _ := strings.Cut(f.Tag.Get("msgpack"), ",")
			if !hasOption(opts, "omitempty") {
				return func(reflect.Value) bool { return false } // that field is always written
			}
			ft := emptyTest(f.Type)
			if ft == nil {
				return nil
			}
			tests, idx = append(tests, ft), append(idx, i)
		}
		return func(v reflect.Value) bool {
			for k, test := range tests {
				if !test(v.Field(idx[k])) {
					return false
				}
			}
			return true
		}
	default:
		return nil
	}
}
