// Package release is the safe layer's one table of what each cuVS release
// of the window changed: every branch of the safe layer on the loaded
// release asks Has for a feature here instead of comparing release names.
//
// The releases are generated.Releases(), oldest first (the generator's
// per-release models say what exists). A feature is the release that
// brought it: Has is true on that release and every later one, so a
// release added to the window takes the newest known branch of every site
// until its own differences are added here (TestLaterRelease). A release
// the window does not have is never loaded: a library loaded
// WithoutVersionCheck is bound as the nearest release of the window.
package release

import (
	"slices"

	"github.com/cuvs-go/cuvs/generated"
)

// Feature is a change of the C API that a release brought.
type Feature int

const (
	// CagraDataset: cuvsCagraBuild, Extend and Merge take cuvsDataset_t
	// (the index keeps a dataset handle), cuvsCagraIndexParams has no
	// compression member, and CAGRA gained cuvsCagraUpdateDataset and
	// cuvsCagraSearchMultiPartition's 26.08 form.
	CagraDataset Feature = iota
	// KMeansParams2608: one cuvsKMeansParams_t of the 26.08 layout
	// (cuvsKMeansParamsCreate_v2608), no _v2 functions.
	KMeansParams2608
	// TieredParams2608: cuvsTieredIndexParams of the 26.08 layout, its
	// CAGRA params the 26.08 struct.
	TieredParams2608
	// AllNeighborsHostOutput: cuvsAllNeighborsBuild writes host outputs
	// (26.06 took device outputs only).
	AllNeighborsHostOutput
	// PCARowMajor: the PCA functions take row-major matrices (26.06:
	// column-major).
	PCARowMajor
	numFeatures
)

// since is the release that brought each feature.
var since = [numFeatures]string{
	CagraDataset:           "26.08",
	KMeansParams2608:       "26.08",
	TieredParams2608:       "26.08",
	AllNeighborsHostOutput: "26.08",
	PCARowMajor:            "26.08",
}

// window and loaded are the window's releases, oldest first (copied once:
// generated.Releases makes a slice per call), and the loaded one:
// generated's, or a test's.
var (
	window = generated.Releases()
	loaded = generated.Release
)

// Has reports whether the loaded release has f. With no library loaded it
// answers for the oldest release (the calls that follow fail with
// ErrNotLoaded anyway). It allocates nothing: search paths ask it.
func Has(f Feature) bool {
	i, j := slices.Index(window, loaded()), slices.Index(window, since[f])
	return i >= 0 && j >= 0 && i >= j
}
