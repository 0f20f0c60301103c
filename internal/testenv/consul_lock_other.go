//go:build !unix

package testenv

// lockFile is a no-op where flock is unavailable: concurrent builds then
// duplicate work, but the temp-file rename still keeps the result whole.
func lockFile(string) (func(), error) { return func() {}, nil }
