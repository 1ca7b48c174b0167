package cluster

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/rs/zerolog"
)

func TestMemberlistLogLevels(t *testing.T) {
	var buf bytes.Buffer
	l := memberlistLogger(zerolog.New(&buf).Level(zerolog.InfoLevel))
	l.Printf("[DEBUG] memberlist: chatter")
	l.Printf("[WARN] memberlist: Was able to connect to x but other probes failed")
	l.Printf("[ERR] memberlist: Failed to send")
	l.Printf("no level at all")
	var got []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		got = append(got, m)
	}
	want := []struct{ level, msg string }{
		{"warn", "memberlist: Was able to connect to x but other probes failed"},
		{"error", "memberlist: Failed to send"},
		{"info", "no level at all"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d lines (%v), want %d (debug filtered out)", len(got), got, len(want))
	}
	for i, w := range want {
		if got[i]["level"] != w.level || got[i]["message"] != w.msg || got[i]["component"] != "memberlist" {
			t.Errorf("line %d = %v, want level %s message %q", i, got[i], w.level, w.msg)
		}
	}
}
