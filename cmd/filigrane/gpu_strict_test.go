package main

import "testing"

// FILIGRANE_GPU_STRICT turns strict GPU mode on; a value that is not a boolean stops serve instead of being
// read as off.
func TestGPUStrictEnv(t *testing.T) {
	t.Setenv("FILIGRANE_GPU_STRICT", "true")
	if err := checkLimitEnv(); err != nil || !envBool("FILIGRANE_GPU_STRICT") {
		t.Fatalf("true: %v %v", err, envBool("FILIGRANE_GPU_STRICT"))
	}
	t.Setenv("FILIGRANE_GPU_STRICT", "")
	if envBool("FILIGRANE_GPU_STRICT") {
		t.Fatal("unset reads as strict")
	}
	t.Setenv("FILIGRANE_GPU_STRICT", "sometimes")
	if err := checkLimitEnv(); err == nil {
		t.Fatal("a malformed FILIGRANE_GPU_STRICT was accepted")
	}
}
