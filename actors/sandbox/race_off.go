//go:build !race

package sandbox

// raceEnabled reports a build with the race detector.
const raceEnabled = false
