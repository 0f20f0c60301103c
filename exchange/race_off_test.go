//go:build !race

package exchange

// raceDetector reports a -race build (allocation counts differ there).
const raceDetector = false
