//go:build race

package ivfpq_test

const raceEnabled = true
