package stream

// sysMemfdCreate is memfd_create's system call number (Go's syscall
// package lacks it on amd64).
const sysMemfdCreate = 319
