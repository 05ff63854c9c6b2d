//go:build !(linux && (amd64 || arm64))

package stream

// sysMemfdCreate < 0: no memfd_create here; FromReader uses a temporary
// file.
const sysMemfdCreate = -1
