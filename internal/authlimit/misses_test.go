package authlimit

import (
	"testing"
	"time"
)

// TestMissesExpireAndStayBounded: a miss holds for MissTTL on the caller's clock, not past it nor on a clock
// that went back; a full memory first drops what expired and keeps the rest, and a memory full of fresh
// misses starts over; Forget drops one at once.
func TestMissesExpireAndStayBounded(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := NewMisses(4)
	m.Put("a", t0)
	m.Put("b", t0)
	if !m.Has("a", t0.Add(MissTTL-time.Nanosecond)) || m.Has("a", t0.Add(MissTTL)) || m.Has("a", t0.Add(-time.Second)) {
		t.Fatal("a miss must hold for MissTTL exactly, and not on a clock that went back")
	}
	if m.Has("c", t0) {
		t.Fatal("an id never put is not a miss")
	}
	m.Put("c", t0.Add(20*time.Second))
	m.Put("d", t0.Add(20*time.Second))
	// Full; a and b have expired: they go, c and d stay.
	now := t0.Add(MissTTL + time.Second)
	m.Put("e", now)
	if m.Len() != 3 || !m.Has("c", now) || !m.Has("d", now) || !m.Has("e", now) {
		t.Fatalf("after a put into a memory full of half expired misses: %d held, want c, d and e", m.Len())
	}
	m.Put("e", now) // a put of an id held is no new entry
	m.Put("f", now)
	// Full of fresh misses: it starts over.
	m.Put("g", now)
	if m.Len() != 1 || !m.Has("g", now) || m.Has("c", now) {
		t.Fatalf("after a put into a memory full of fresh misses: %d held, want g alone", m.Len())
	}
	m.Forget("g")
	if m.Has("g", now) {
		t.Fatal("a forgotten miss still holds")
	}
}
