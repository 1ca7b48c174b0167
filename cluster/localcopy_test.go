package cluster

import (
	"reflect"
	"testing"
	"time"
)

type lcTree struct {
	Name     string
	Children []*lcTree
	Tags     map[string][]int
	At       time.Time
	Skip     string   `msgpack:"-"`
	Opt      []string `msgpack:"opt,omitempty"`
	hidden   int
}

type lcAny struct {
	Value any
}

type lcCustom struct {
	At time.Time
	D  time.Duration
	B  [4]byte
	E  encodedElsewhere
}

type encodedElsewhere struct{ N int }

func (e encodedElsewhere) MarshalText() ([]byte, error) { return []byte("x"), nil }

// TestLocalCopy: recursive types, omitted and unexported fields, and types a copy cannot mirror (an
// interface, a custom marshaller) are refused so that they travel as envelopes.
func TestLocalCopy(t *testing.T) {
	r := NewRegistry()
	r.MustRegister(lcTree{}, lcAny{}, lcCustom{})
	in := &lcTree{Name: "root", Children: []*lcTree{{Name: "leaf", Tags: map[string][]int{"a": {1}}}}, Skip: "s",
		Opt: []string{}, hidden: 3, At: time.Date(2026, 11, 27, 9, 0, 0, 5, time.UTC)}
	got, ok := r.LocalCopy(in)
	if !ok {
		t.Fatal("a recursive plain type is not copyable")
	}
	env, err := r.Wrap(in)
	if err != nil {
		t.Fatal(err)
	}
	want, err := r.Unwrap(env)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("copy %+v, envelope %+v", got, want)
	}
	c := got.(*lcTree)
	c.Children[0].Tags["a"][0] = 9
	if in.Children[0].Tags["a"][0] != 1 {
		t.Fatal("the copy shares memory with the original")
	}
	if _, ok := r.LocalCopy(lcAny{Value: 1}); ok {
		t.Error("a type with an interface field was copied")
	}
	if _, ok := r.LocalCopy(lcCustom{}); ok {
		t.Error("a type holding a TextMarshaler was copied")
	}
	if _, ok := r.LocalCopy(struct{ A int }{}); ok {
		t.Error("an unregistered type was copied")
	}
}
