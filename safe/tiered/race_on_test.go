//go:build race

package tiered_test

const raceEnabled = true
