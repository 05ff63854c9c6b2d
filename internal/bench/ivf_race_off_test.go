//go:build !race

package bench_test

const ivfRace = false
