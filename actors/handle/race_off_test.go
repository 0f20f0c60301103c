//go:build !race

package handle

// raceDetector reports a -race build (allocation counts differ there).
const raceDetector = false
