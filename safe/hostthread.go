package safe

import (
	"runtime"
	"sync"
	"unsafe"

	"github.com/cuvs-go/cuvs/generated"
)

// cuVS keeps its pinned host memory resource in a thread_local that only
// cuvsRMMHostAlloc creates: cuvsRMMHostFree on another OS thread crashes.
// Goroutines move between threads, so every pinned allocation and free runs
// on one goroutine locked to one thread.
var hostThread struct {
	once sync.Once
	reqs chan hostReq
}

type hostReq struct {
	alloc bool
	ptr   unsafe.Pointer
	bytes uint64
	done  chan hostResp
}

type hostResp struct {
	ptr unsafe.Pointer
	err error
}

func hostDo(r hostReq) hostResp {
	hostThread.once.Do(func() {
		hostThread.reqs = make(chan hostReq)
		go func() {
			runtime.LockOSThread() // for the life of the process
			for r := range hostThread.reqs {
				var resp hostResp
				if r.alloc {
					resp.err = generated.CuvsRMMHostAlloc(&resp.ptr, r.bytes)
				} else {
					resp.err = generated.CuvsRMMHostFree(r.ptr, r.bytes)
				}
				r.done <- resp
			}
		}()
	})
	r.done = make(chan hostResp, 1)
	hostThread.reqs <- r
	return <-r.done
}

func hostAllocBytes(bytes uint64) (unsafe.Pointer, error) {
	resp := hostDo(hostReq{alloc: true, bytes: bytes})
	if resp.err == nil {
		livePinned.Inc()
	}
	return resp.ptr, resp.err
}

func hostFreeBytes(p unsafe.Pointer, bytes uint64) error {
	livePinned.Dec()
	return hostDo(hostReq{ptr: p, bytes: bytes}).err
}
