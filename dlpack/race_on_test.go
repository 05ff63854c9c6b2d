//go:build race

package dlpack_test

const raceEnabled = true
