// Package devicecheck holds build.sh, which builds the device-selection check
// (the test binary of safe/internal/cudart) for a GPU machine without Go or
// libcuvs. It has no code of its own.
package devicecheck
