package codec

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestCanonicalJSONVectors(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"b":2,"a":1}`, `{"a":1,"b":2}`},
		{` { "a" : [ 1 , 2.0 , -0, 1e2 ] } `, `{"a":[1,2,0,100]}`},
		{`"\u00e9\/\u0007"`, "\"\u00e9/\\u0007\""},
		{`1E21`, `1e+21`},
		{`123456789012345678901`, `123456789012345680000`},
		{`0.000001`, `0.000001`},
		{`0.0000001`, `1e-7`},
		{`1.5e-300`, `1.5e-300`},
		{`4.50`, `4.5`},
		{`-1.0000000000000002`, `-1.0000000000000002`},
		{`9007199254740993`, `9007199254740992`},
		{`[true,false,null]`, `[true,false,null]`},
		// RFC 8785 section 3.2.3 sorting example: UTF-16 code unit order puts U+1F600 (D83D) before U+FB33.
		{"{\"\u20ac\":1,\"\\r\":2,\"\ufb33\":3,\"1\":4,\"\U0001F600\":5,\"\u0080\":6,\"\u00f6\":7}",
			"{\"\\r\":2,\"1\":4,\"\u0080\":6,\"\u00f6\":7,\"\u20ac\":1,\"\U0001F600\":5,\"\ufb33\":3}"},
		{`"\ud83d\ude00"`, "\"\U0001F600\""},
	}
	for _, c := range cases {
		got, err := CanonicalJSON([]byte(c.in))
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("%s: got %s want %s", c.in, got, c.want)
		}
	}
}

func TestCanonicalJSONRejects(t *testing.T) {
	for _, in := range []string{``, `{`, `{"a":1,"a":2}`, `"\ud800"`, `"\udc00x"`, "\"\xff\"", `1e400`, `01`, `1.`,
		`[1,]`, `{"a":1}x`, `tru`, "\"a\x01\"", `{"a" 1}`, strings.Repeat("[", 600) + strings.Repeat("]", 600)} {
		if _, err := CanonicalJSON([]byte(in)); err == nil {
			t.Errorf("%q: accepted", in)
		}
	}
}

func TestIDFromJSONSemanticEquality(t *testing.T) {
	a, err := IDFromJSON([]byte(`{"owner":"acme","n":10,"tags":["x","y"]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := IDFromJSON([]byte("{\n  \"tags\": [\"x\", \"y\"],\n  \"n\": 1.0e1,\n  \"owner\": \"acme\"\n}"))
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatalf("semantically equal objects gave %s and %s", a, b)
	}
	c, err := IDFromJSON([]byte(`{"owner":"acmf","n":10,"tags":["x","y"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if c == a {
		t.Fatal("a one-byte change kept the id")
	}
	if len(a.String()) != 64 {
		t.Fatalf("bad hex %q", a.String())
	}
}

func TestParseIDRoundTrip(t *testing.T) {
	id := randomID(rand.New(rand.NewPCG(1, 2)))
	got, err := ParseID(id.String())
	if err != nil || got != id {
		t.Fatalf("round trip: %v %v", got, err)
	}
	if _, err := ParseID(strings.ToUpper(id.String())); err != nil {
		t.Fatalf("upper case: %v", err)
	}
	for _, bad := range []string{"", "00", strings.Repeat("g", 64), strings.Repeat("0", 65)} {
		if _, err := ParseID(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestFrameRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	id := randomID(rng)
	bits := frameBits(id)
	got, ok := parseFrame(bits)
	if !ok || got != id {
		t.Fatal("frame round trip failed")
	}
	bits[rng.IntN(len(bits))] ^= 1
	if _, ok := parseFrame(bits); ok {
		t.Fatal("corrupted frame accepted")
	}
}

func TestConvCodeCorrectsNoise(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	fails := 0
	for trial := 0; trial < 20; trial++ {
		id := randomID(rng)
		coded := convEncode(frameBits(id))
		// BPSK over AWGN at Es/N0 where the raw hard-decision error rate is about 10%.
		const sigma = 0.78
		llr := make([]float64, len(coded))
		hardErr := 0
		for i, c := range coded {
			x := 2*float64(c) - 1 + sigma*rng.NormFloat64()
			if (x > 0) != (c == 1) {
				hardErr++
			}
			llr[i] = 2 * x / (sigma * sigma)
		}
		out := convDecode(llr)
		dec := make([]uint8, len(out))
		for i, v := range out {
			if v > 0 {
				dec[i] = 1
			}
		}
		if got, ok := parseFrame(dec); !ok || got != id {
			fails++
		}
		_ = hardErr
	}
	if fails > 1 {
		t.Fatalf("%d/20 frames lost at ~10%% raw error rate", fails)
	}
}

func TestConvCodeClean(t *testing.T) {
	id := randomID(rand.New(rand.NewPCG(7, 8)))
	coded := convEncode(frameBits(id))
	llr := make([]float64, len(coded))
	for i, c := range coded {
		llr[i] = 4 * (2*float64(c) - 1)
	}
	out := convDecode(llr)
	dec := make([]uint8, len(out))
	for i, v := range out {
		if v > 0 {
			dec[i] = 1
		}
		if math.Abs(v) < 1 {
			t.Fatalf("weak LLR %v at %d", v, i)
		}
	}
	if got, ok := parseFrame(dec); !ok || got != id {
		t.Fatal("clean decode failed")
	}
}

func randomID(rng *rand.Rand) ID {
	var id ID
	for i := range id {
		id[i] = byte(rng.IntN(256))
	}
	return id
}
