//go:build race

package ivfflat_test

const raceEnabled = true
