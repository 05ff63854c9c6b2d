// Package pca is cuVS's principal component analysis on the GPU: Fit finds
// the principal components of rows of float32 data (eigenvectors of their
// covariance), FitTransform also projects the data onto them, and a Model's
// Transform and InverseTransform map rows into the components' space and
// back. Data and models are Go memory, row-major, on every release.
//
// # One layout over two releases
//
// cuVS 26.06's C functions take column-major matrices only; 26.08 takes
// row-major or column-major (all of a call's matrices alike). On 26.06
// this package transposes each matrix on the host on its way to and from
// the GPU: one extra host buffer the size of the matrix and an O(rows ×
// columns) pass per copy, on top of the copies themselves. On 26.08 the
// matrices are copied as they are.
//
// # Conventions (cuVS's, which are sklearn's)
//
//   - The covariance divides by rows − 1; ExplainedVariance holds its top
//     eigenvalues, ExplainedVarianceRatio each over the sum of all,
//     SingularValues sqrt(eigenvalue × (rows − 1)), NoiseVariance the mean
//     of the eigenvalues left out (0 when the components are not fewer
//     than both the columns and the rows).
//   - Signs: each component's largest-magnitude entry is made positive, or
//     with FlipSignsBasedOnU the largest-magnitude value of its projection
//     of the fitted data.
//   - Whitening divides each projected component by sqrt(eigenvalue),
//     computed as singular value / sqrt(rows − 1).
//
// # What the C API does not say
//
//   - Where the number of components comes from depends on the RAFT
//     underneath: RAFT's pointer-based PCA (the column-major-only one)
//     reads it from the params and never from the tensors' shapes, so it
//     reads and writes out of bounds when they disagree; the layout-generic
//     RAFT that 26.08's row-major path needs reads it from the components'
//     rows (and checks it against the columns). Which one a 26.06 build
//     has was not verified. This package sizes every tensor and the params
//     from one number, so both agree.
//   - Whitening counts the rows of the data being transformed, not the
//     rows fitted: Transform of n rows scales by sqrt(n − 1) / singular
//     value, so whitened transforms of a few rows are not on the fitted
//     scale, and a single row transforms to 0 (the inverse of one row
//     returns the mean). Read from raft's pcaTransform and
//     pcaInverseTransform; not tried on a GPU.
//   - The input is centered in place and the mean added back afterwards
//     (the params' copy flag is never read): a caller's device input would
//     come back only up to rounding. Here the input is always a copy.
//   - Fitting needs at least two rows and two columns; transforms at least
//     one row and two columns. noise_vars is a rank-1 tensor of one
//     value (a device scalar view's extents are rank 1); explained
//     variances, singular values and means rank-1. A rank-0 noise_vars is
//     refused ("ndim mismatch between return mdspan and DLTensor", seen on
//     26.06).
//   - On 26.08 the layout is decided from the first matrix, column-major
//     tested first: a matrix of one row or one column can read as either.
//     This package hands C explicit strides.
//
// # The C API
//
// cuvsPcaParamsCreate/Destroy (DefaultParams, and around every call),
// cuvsPcaFit (Fit), cuvsPcaFitTransform (FitTransform), cuvsPcaTransform
// (Model.Transform), cuvsPcaInverseTransform (Model.InverseTransform);
// cuvsRMMAlloc/Free, cuvsMatrixCopy and cuvsStreamSync for the copies.
package pca
