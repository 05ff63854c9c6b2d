// Package pca is cuVS's principal component analysis on the GPU: Fit finds
// the principal components of rows of float32 data (eigenvectors of their
// covariance), FitTransform also projects the data onto them, and a
// Model's Transform and InverseTransform map rows into the components'
// space and back. Data and models are Go memory, row-major, on every
// release.
//
//	if err := safe.Load(); err != nil { ... }
//	res, _ := safe.NewResources()
//	defer res.Close()
//	p, _ := pca.DefaultParams()
//	p.Components = 2
//	m, _ := pca.Fit(res, &p, data, dim)  // data: rows × dim []float32
//	t, _ := m.Transform(res, data)       // rows × 2
//	back, _ := m.InverseTransform(res, t) // rows × dim, in the components' span
//
// Start from DefaultParams (one component); Fit needs at least two rows
// and two columns. The Model's fields follow cuVS's conventions, which are
// sklearn's: the covariance divides by rows − 1, ExplainedVariance holds
// its top eigenvalues, ExplainedVarianceRatio each over the sum of all,
// SingularValues sqrt(eigenvalue × (rows − 1)), NoiseVariance the mean of
// the eigenvalues left out (0 when the components are not fewer than both
// the columns and the rows); each component's largest-magnitude entry is
// made positive, or with Params.FlipSignsBasedOnU the largest-magnitude
// value of its projection of the fitted data. Whitening counts the rows
// transformed (Model.Transform).
//
// # Design
//
// cuVS 26.06's C functions take column-major matrices only; 26.08 takes
// row-major or column-major (all of a call's matrices alike). On 26.06 this
// package transposes each matrix on the host on its way to and from the
// GPU: one extra host buffer the size of the matrix and an O(rows ×
// columns) pass per copy, on top of the copies themselves. On 26.08 the
// matrices are copied as they are, with explicit strides (26.08 decides
// the layout from the first matrix, column-major tested first, and a
// matrix of one row or one column can read as either). The input is
// centered in place and the mean added back afterwards (the params' copy
// flag is never read): here the input is always a copy. Where the number
// of components comes from depends on the RAFT underneath: RAFT's
// pointer-based PCA (the column-major-only one) reads it from the params
// and never from the tensors' shapes, so it reads and writes out of bounds
// when they disagree; the layout-generic RAFT that 26.08's row-major path
// needs reads it from the components' rows (and checks it against the
// columns). Which one a 26.06 build has was not verified: the package
// sizes every tensor and the params from one number. noise_vars is a
// rank-1 tensor of one value (a rank-0 one is refused, "ndim mismatch
// between return mdspan and DLTensor", seen on 26.06); explained
// variances, singular values and means rank-1. C calls:
// cuvsPcaParamsCreate/Destroy (DefaultParams, and around every call), cuvsPcaFit,
// cuvsPcaFitTransform, cuvsPcaTransform, cuvsPcaInverseTransform;
// cuvsRMMAlloc/Free, cuvsMatrixCopy and cuvsStreamSync for the copies.
package pca
