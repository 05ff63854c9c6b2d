//go:build !race

package multigpu_test

const raceEnabled = false
