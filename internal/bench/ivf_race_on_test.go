//go:build race

package bench_test

// ivfRace: the race detector allocates on its own; allocation counts are
// not checked under it.
const ivfRace = true
