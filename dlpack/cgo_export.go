package dlpack

// This file holds the //export; cgo allows only declarations in its preamble.

import "C"

import "unsafe"

// cuvsgoDLPackExportDeleter is the deleter of every tensor Export hands out.
// C calls it, from any thread.
//
//export cuvsgoDLPackExportDeleter
func cuvsgoDLPackExportDeleter(self unsafe.Pointer) { releaseExport(self) }
