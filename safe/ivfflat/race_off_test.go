//go:build !race

package ivfflat_test

const raceEnabled = false
