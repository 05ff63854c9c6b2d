//go:build !race

package ivfsq_test

const raceEnabled = false
