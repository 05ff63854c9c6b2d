// Package gputest holds the GPU test bundle: build.sh (make gpu-test)
// builds, on a machine with Go and gcc, the tests of every package that
// loads libcuvs_c as test binaries (race and cgocheck2), with run.sh and
// the programs the tests need (bin/: the dtype probe, cbench, the README's
// program), into one folder to copy to a GPU machine that has libcuvs but
// no Go; run.sh runs them there against a given libcuvs_c and sums up,
// telling tests that failed only because the library was built without an
// element type from real failures. This package's tests check run.sh's
// sums on canned test output; dtypeprobe is the probe.
package gputest
