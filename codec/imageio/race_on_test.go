//go:build race

package imageio

// raceDetector reports whether the tests run under the race detector, whose instrumented build allocates
// differently from the production build (more values escape to the heap).
const raceDetector = true
