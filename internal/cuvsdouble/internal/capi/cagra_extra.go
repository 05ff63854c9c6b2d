package capi

/*
#include <stdlib.h>
#include <string.h>
#include "capi.h"
*/
import "C"

import "unsafe"

// SetCompressionParams writes *p.
func SetCompressionParams(p unsafe.Pointer, v CompressionParams) {
	c := (*C.capi_compression_params)(p)
	c.pq_bits = C.uint32_t(v.PqBits)
	c.pq_dim = C.uint32_t(v.PqDim)
	c.vq_n_centers = C.uint32_t(v.VqNCenters)
	c.kmeans_n_iters = C.uint32_t(v.KmeansNIters)
	c.vq_kmeans_trainset_fraction = C.double(v.VqKmeansTrainsetFraction)
	c.pq_kmeans_trainset_fraction = C.double(v.PqKmeansTrainsetFraction)
}

// SetAceParams writes *p but for build_dir (see SwapAceBuildDir).
func SetAceParams(p unsafe.Pointer, v AceParams) {
	c := (*C.capi_ace_params)(p)
	c.npartitions = C.size_t(v.NPartitions)
	c.ef_construction = C.size_t(v.EfConstruction)
	c.use_disk = C.bool(v.UseDisk)
	c.max_host_memory_gb = C.double(v.MaxHostMemoryGB)
	c.max_gpu_memory_gb = C.double(v.MaxGPUMemoryGB)
}

// SwapAceBuildDir puts a malloc'd copy of dir into build_dir and returns a
// function that frees it and puts the previous pointer back (call it before
// cuvsAceParamsDestroy, which frees the library's own string).
func SwapAceBuildDir(p unsafe.Pointer, dir string) (restore func()) {
	c := (*C.capi_ace_params)(p)
	old := c.build_dir
	c.build_dir = C.CString(dir)
	return func() {
		C.free(unsafe.Pointer(c.build_dir))
		c.build_dir = old
	}
}
