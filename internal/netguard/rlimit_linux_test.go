package netguard

import (
	"syscall"
	"testing"
)

func TestRaiseFileLimit(t *testing.T) {
	soft, err := RaiseFileLimit()
	if err != nil {
		t.Fatal(err)
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if uint64(lim.Cur) != soft || lim.Cur != lim.Max {
		t.Fatalf("soft %d (reported %d), hard %d: want soft raised to hard", lim.Cur, soft, lim.Max)
	}
}
