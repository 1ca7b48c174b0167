//go:build !race

package imageio

// raceDetector reports whether the tests run under the race detector (see race_on_test.go).
const raceDetector = false
