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

// TestMemberlistLinesNameTheirComponentOnce: the provider's memberlist lines carry "component" once (a
// duplicate JSON key is invalid for many log pipelines) and name the node; the provider's own logger, which
// names component "cluster-provider", made the key appear twice.
func TestMemberlistLinesNameTheirComponentOnce(t *testing.T) {
	var buf bytes.Buffer
	p, err := NewMemberlistProvider(ProviderConfig{NodeName: "n1", BindHost: "127.0.0.1", Logger: zerolog.New(&buf)})
	if err != nil {
		t.Fatal(err)
	}
	p.gossipLogger().Printf("[WARN] memberlist: Was able to connect to x but other probes failed")
	line := bytes.TrimSpace(buf.Bytes())
	if n := bytes.Count(line, []byte(`"component":`)); n != 1 {
		t.Fatalf("line %s names component %d times, want once", line, n)
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatal(err)
	}
	if m["component"] != "memberlist" || m["node"] != "n1" || m["level"] != "warn" {
		t.Fatalf("line %v, want component memberlist, node n1, level warn", m)
	}
}
