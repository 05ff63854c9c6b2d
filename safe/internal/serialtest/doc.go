// Package serialtest holds the tests that read damaged index files and
// streams through the five index packages (bruteforce, cagra, ivfflat,
// ivfsq, ivfpq) alike: truncated, corrupt, with bytes after the index, or
// over a size limit. Its one exported function, Fuzz, is the body of every
// package's FuzzDeserializeFrom.
package serialtest
