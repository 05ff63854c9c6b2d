// Package handletest checks, for every safe type that holds a cuVS handle
// (an index, a prepared or filtered search, a quantizer, a multi-GPU
// index), that once it is closed no field the garbage collector scans
// still holds one of the handles it freed. A destroyed handle is freed C
// memory; kept in a Go pointer field (the generator's old form of the
// handle typedefs, `type CuvsCagraIndex_t = *CuvsCagraIndex`), it is read
// by the collector, and Go 1.26 puts its heap at a random base where C's
// mappings also lie: "found bad pointer in Go heap" (issues 29 and 41).
// The handles are integers now; this package builds a real object of each
// type with the loaded library and proves it.
package handletest
