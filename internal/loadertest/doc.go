// Package loadertest tests the run-time loading of package generated against
// a tiny shared library of its own (testdata/tinycuvs.c), built with gcc by
// the tests. It holds no code beyond its tests.
package loadertest
