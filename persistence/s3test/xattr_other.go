//go:build !linux

package s3test

// userXattrs is only probed on Linux; elsewhere the sidecar mode, which works on any filesystem, is used.
func userXattrs(string) bool { return false }
