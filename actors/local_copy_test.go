package actors_test

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/cluster"
)

// allMessages is every type a node registers (internal/node.Start).
func allMessages() []any {
	var all []any
	for _, set := range [][]any{actors.OrgMessages(), actors.JobMessages(), actors.BatchMessages(), actors.WorkMessages()} {
		all = append(all, set...)
	}
	return all
}

// TestLocalCopyMatchesEnvelope: a reply to a caller on the same node is a deep copy (cluster.LocalCopy)
// instead of an encoded envelope; the caller must see exactly what Unwrap(Wrap(v)) would give it (nil and
// empty slices, omitted fields, times), and the copy must share no memory with the sender's value.
func TestLocalCopyMatchesEnvelope(t *testing.T) {
	reg := cluster.NewRegistry()
	reg.MustRegister(allMessages()...)
	copyable := 0
	for _, msg := range allMessages() {
		typ := reflect.TypeOf(msg)
		for _, mode := range []fillMode{fillZero, fillEmpty, fillFull} {
			for seed := range uint64(4) {
				v := reflect.New(typ)
				fill(v.Elem(), rand.New(rand.NewPCG(seed, uint64(mode))), mode, 0)
				got, ok := reg.LocalCopy(v.Interface())
				if !ok {
					if mode == fillZero && seed == 0 {
						t.Logf("%v travels as an envelope (not copyable)", typ)
					}
					continue
				}
				if mode == fillZero && seed == 0 {
					copyable++
				}
				env, err := reg.Wrap(v.Interface())
				if err != nil {
					t.Fatalf("wrap %v: %v", typ, err)
				}
				want, err := reg.Unwrap(env)
				if err != nil {
					t.Fatalf("unwrap %v: %v", typ, err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%v (mode %d, seed %d): local copy differs from the envelope's value\ncopy:     %+v\nenvelope: %+v",
						typ, mode, seed, got, want)
				}
				// No shared memory: scribbling over the copy leaves the original as it was.
				fill(reflect.ValueOf(got).Elem(), rand.New(rand.NewPCG(seed+100, 7)), fillFull, 0)
				again, err := reg.Wrap(v.Interface())
				if err != nil {
					t.Fatalf("wrap %v again: %v", typ, err)
				}
				after, err := reg.Unwrap(again)
				if err != nil {
					t.Fatalf("unwrap %v again: %v", typ, err)
				}
				if !reflect.DeepEqual(after, want) {
					t.Fatalf("%v (mode %d, seed %d): changing the local copy changed the original", typ, mode, seed)
				}
			}
		}
	}
	// The hot replies must take the fast path (a status GET answers with a JobReply, every request is
	// admitted with an OrgAdmitReply): a type that stops being copyable should be noticed.
	for _, hot := range []any{&actors.JobReply{}, &actors.OrgAdmitReply{}, &actors.OrgReply{}} {
		if _, ok := reg.LocalCopy(hot); !ok {
			t.Errorf("%T is no longer copyable: local replies of it are encoded again", hot)
		}
	}
	if copyable == 0 {
		t.Fatal("no message type is copyable")
	}
}

type fillMode int

const (
	fillZero  fillMode = iota // the zero value
	fillEmpty                 // non-nil but empty slices, maps and pointers to zero values
	fillFull                  // random values, 1-3 elements per slice and map
)

// fill sets every exported field reachable from v.
func fill(v reflect.Value, rng *rand.Rand, mode fillMode, depth int) {
	if mode == fillZero || depth > 6 || !v.CanSet() {
		return
	}
	if v.Type() == reflect.TypeOf(time.Time{}) {
		if mode == fillFull {
			v.Set(reflect.ValueOf(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(1e18)))))
		}
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(mode == fillFull && rng.IntN(2) == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if mode == fillFull {
			v.SetInt(rng.Int64N(200) - 100)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if mode == fillFull {
			v.SetUint(rng.Uint64N(200))
		}
	case reflect.Float32, reflect.Float64:
		if mode == fillFull {
			v.SetFloat(rng.Float64())
		}
	case reflect.String:
		if mode == fillFull {
			v.SetString(string(rune('a' + rng.IntN(26))))
		}
	case reflect.Array:
		for i := range v.Len() {
			fill(v.Index(i), rng, mode, depth+1)
		}
	case reflect.Slice:
		n := 0
		if mode == fillFull {
			n = 1 + rng.IntN(3)
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(s.Index(i), rng, mode, depth+1)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		if mode == fillFull {
			for range 1 + rng.IntN(3) {
				k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
				fill(k, rng, mode, depth+1)
				fill(e, rng, mode, depth+1)
				m.SetMapIndex(k, e)
			}
		}
		v.Set(m)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), rng, mode, depth+1)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), rng, mode, depth+1)
			}
		}
	}
}
