package gpu

import (
	"testing"
	"time"
)

func TestWarmLifecycle(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := NewState(true, 30*time.Second)
	if s.Status != StatusIdle {
		t.Fatalf("new: %s", s.Status)
	}
	s.Wake(t0)
	if s.Status != StatusStarting || !s.ReadyAt.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("after wake: %+v", s)
	}
	if s.Begin(t0.Add(10 * time.Second)) {
		t.Fatal("work began on a starting GPU (it must run on the CPU meanwhile)")
	}
	s.Tick(t0.Add(30 * time.Second))
	if s.Status != StatusReady {
		t.Fatalf("after start-up: %s", s.Status)
	}
	// Work in progress keeps it warm past the 15 minutes.
	if !s.Begin(t0.Add(time.Minute)) {
		t.Fatal("work refused on a ready GPU")
	}
	s.Tick(t0.Add(20 * time.Minute))
	if s.Status != StatusReady {
		t.Fatalf("went idle while working: %s", s.Status)
	}
	s.End(t0.Add(21 * time.Minute))
	s.Tick(t0.Add(21*time.Minute + WarmFor - time.Second))
	if s.Status != StatusReady {
		t.Fatalf("idle before 15 minutes after the last work: %s", s.Status)
	}
	// A wake call extends the warm time.
	s.Wake(t0.Add(30 * time.Minute))
	s.Tick(t0.Add(44 * time.Minute))
	if s.Status != StatusReady {
		t.Fatalf("wake did not extend: %s", s.Status)
	}
	s.Tick(t0.Add(45 * time.Minute))
	if s.Status != StatusIdle {
		t.Fatalf("still warm after the extension: %s", s.Status)
	}
}

func TestUnavailableStaysUnavailable(t *testing.T) {
	s := NewState(false, 0)
	s.Wake(time.Now())
	if s.Status != StatusUnavailable || s.Begin(time.Now()) {
		t.Fatalf("unavailable GPU changed: %+v", s)
	}
}
