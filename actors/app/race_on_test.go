//go:build race

package app

// raceDetector reports a -race build (allocation counts differ there).
const raceDetector = true
