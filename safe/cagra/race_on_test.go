//go:build race

package cagra_test

const raceEnabled = true
