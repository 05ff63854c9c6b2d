// Package doctables holds the tests that keep the tables of package safe's
// docs (Distances, in Metric's doc; Neighbor ids, in Sentinel's) true: every package of safe has its rows,
// the sentinels named are the constants' values, and the distances the
// packages return are the table's formulas. It has no code of its own.
package doctables
