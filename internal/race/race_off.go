//go:build !race

// Package race says whether the race detector is built in, for the tests
// that scale their load down under it (it runs them 5–20× slower) or skip
// an allocation count it would change.
package race

// Enabled reports whether the binary was built with -race.
const Enabled = false
