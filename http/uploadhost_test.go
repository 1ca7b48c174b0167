package http

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// TestExactReaderNeverPassesExtraBytes: a body longer than declared fails at the read that sees the first
// extra byte, and what reaches the store never exceeds the declared size, whatever the read sizes.
func TestExactReaderNeverPassesExtraBytes(t *testing.T) {
	for _, c := range []struct {
		name string
		body int
		want error
	}{
		{"exact", 1000, nil},
		{"short", 999, errBodyShort},
		{"one more", 1001, errBodyLong},
		{"far more", 1 << 20, errBodyLong},
	} {
		for _, src := range []func(io.Reader) io.Reader{
			func(r io.Reader) io.Reader { return r },
			iotest.OneByteReader,
			iotest.HalfReader,
		} {
			var stored bytes.Buffer
			body := bytes.NewReader(make([]byte, c.body))
			_, err := io.Copy(&stored, &exactReader{r: src(body), want: 1000})
			if !errors.Is(err, c.want) {
				t.Fatalf("%s: %v, want %v", c.name, err, c.want)
			}
			if stored.Len() > 1000 {
				t.Fatalf("%s: %d bytes passed on for a 1000-byte upload", c.name, stored.Len())
			}
			if read := c.body - body.Len(); read > 1001 {
				t.Fatalf("%s: %d bytes read from the connection, want at most 1001", c.name, read)
			}
		}
	}
}
