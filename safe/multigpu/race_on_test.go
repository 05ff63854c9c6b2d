//go:build race

package multigpu_test

const raceEnabled = true
