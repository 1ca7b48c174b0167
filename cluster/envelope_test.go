package cluster

import (
	"errors"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	"google.golang.org/protobuf/types/known/anypb"
)

func TestWrapUnwrapRoundTrip(t *testing.T) {
	reg := testRegistry(t)
	for _, in := range []any{Ping{N: 7, Text: "héllo"}, &Ping{N: -1}} {
		a, err := reg.Wrap(in)
		if err != nil {
			t.Fatalf("Wrap(%#v): %v", in, err)
		}
		if a.TypeUrl != "msgpack/cluster.Ping" {
			t.Fatalf("TypeUrl = %q", a.TypeUrl)
		}
		out, err := reg.Unwrap(a)
		if err != nil {
			t.Fatalf("Unwrap: %v", err)
		}
		p, ok := out.(*Ping)
		if !ok {
			t.Fatalf("Unwrap returned %T, want *Ping", out)
		}
		want := in
		if pp, ok := in.(*Ping); ok {
			want = *pp
		}
		if *p != want.(Ping) {
			t.Fatalf("round trip: got %#v want %#v", *p, want)
		}
	}
}

func TestGenericRegisterAndNames(t *testing.T) {
	reg := NewRegistry()
	if err := Register[Secret](reg); err != nil {
		t.Fatal(err)
	}
	if err := Register[*Secret](reg); err != nil {
		t.Fatalf("registering the same type again must be a no-op: %v", err)
	}
	if name, ok := reg.Name(&Secret{}); !ok || name != "cluster.Secret" {
		t.Fatalf("Name = %q, %v", name, ok)
	}
	// Same name for another type is refused, and so is a second name for a type.
	if err := reg.RegisterName("cluster.Secret", Ping{}); err == nil {
		t.Fatal("name clash accepted")
	}
	if err := reg.RegisterName("other.Secret", Secret{}); err == nil {
		t.Fatal("second name for one type accepted")
	}
	if err := reg.Register(struct{ A int }{}); err == nil {
		t.Fatal("anonymous struct accepted")
	}
	if err := reg.Register(nil); err == nil {
		t.Fatal("nil accepted")
	}
	if err := reg.RegisterName("bad/name", Ping{}); err == nil {
		t.Fatal("name with slash accepted")
	}
}

func TestWrapUnregisteredFails(t *testing.T) {
	reg := testRegistry(t)
	_, err := reg.Wrap(Secret{Word: "x"})
	if !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("Wrap(unregistered) error = %v, want ErrNotRegistered", err)
	}
	if _, err := reg.Wrap((*Ping)(nil)); err == nil {
		t.Fatal("Wrap(nil pointer) succeeded")
	}
	if _, err := reg.Wrap(nil); err == nil {
		t.Fatal("Wrap(nil) succeeded")
	}
}

func TestUnwrapUnknownTypeURL(t *testing.T) {
	reg := testRegistry(t)
	b, _ := msgpack.Marshal(Secret{Word: "x"})
	_, err := reg.Unwrap(&anypb.Any{TypeUrl: "msgpack/cluster.Secret", Value: b})
	if !errors.Is(err, ErrUnknownType) {
		t.Fatalf("error = %v, want ErrUnknownType", err)
	}
	if !strings.Contains(err.Error(), "msgpack/cluster.Secret") {
		t.Fatalf("error %q does not name the type URL", err)
	}
	// Not a msgpack envelope at all.
	_, err = reg.Unwrap(&anypb.Any{TypeUrl: "type.googleapis.com/google.protobuf.StringValue", Value: b})
	if !errors.Is(err, ErrBadEnvelope) {
		t.Fatalf("foreign type URL: error = %v, want ErrBadEnvelope", err)
	}
	if _, err := reg.Unwrap(nil); !errors.Is(err, ErrBadEnvelope) {
		t.Fatalf("nil envelope: error = %v, want ErrBadEnvelope", err)
	}
}

func TestUnwrapWrongBytes(t *testing.T) {
	reg := testRegistry(t)
	good, err := reg.Wrap(Ping{N: 1, Text: "a"})
	if err != nil {
		t.Fatal(err)
	}
	str, _ := msgpack.Marshal("a string, not a Ping")
	cases := map[string][]byte{
		"empty":      nil,
		"nil":        {0xc0},
		"garbage":    []byte("not msgpack at all"),
		"reserved":   {0xc1},
		"truncated":  good.Value[:len(good.Value)-2],
		"trailing":   append(append([]byte{}, good.Value...), 0x01),
		"wrong kind": str,
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			v, err := reg.Unwrap(&anypb.Any{TypeUrl: good.TypeUrl, Value: b})
			if !errors.Is(err, ErrBadEnvelope) {
				t.Fatalf("Unwrap(%x) = %#v, %v; want ErrBadEnvelope", b, v, err)
			}
			if !strings.Contains(err.Error(), "cluster.Ping") {
				t.Fatalf("error %q does not name the type", err)
			}
		})
	}
}

func TestFailureIsAlwaysRegistered(t *testing.T) {
	reg := NewRegistry()
	a, err := reg.Wrap(&Failure{Code: "c", Message: "m"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = reg.DecodeReply(a)
	var f *Failure
	if !errors.As(err, &f) || f.Code != "c" || f.Message != "m" {
		t.Fatalf("DecodeReply(Failure) error = %v", err)
	}
}
