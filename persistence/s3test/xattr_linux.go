package s3test

import (
	"os"
	"path/filepath"
	"syscall"
)

// userXattrs reports whether dir's filesystem stores user extended attributes, where versitygw's posix
// backend keeps object metadata by default (tmpfs and some container overlays do not).
func userXattrs(dir string) bool {
	probe := filepath.Join(dir, ".xattr-probe")
	if err := os.WriteFile(probe, nil, 0o600); err != nil {
		return false
	}
	defer os.Remove(probe)
	return syscall.Setxattr(probe, "user.filigrane.probe", []byte("1"), 0) == nil
}
