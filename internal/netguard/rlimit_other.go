//go:build !unix

package netguard

// RaiseFileLimit does nothing where there is no RLIMIT_NOFILE; it reports no limit.
func RaiseFileLimit() (uint64, error) { return 0, nil }
