package quantize

import "github.com/cuvs-go/cuvs/generated"

// PQHandle exposes a PQ's C handle to the tests that call cuVS directly.
func PQHandle(q *PQ) generated.CuvsProductQuantizer_t { return q.h }
