//go:build race

package bruteforce_test

const raceEnabled = true
