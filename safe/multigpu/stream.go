package multigpu

import (
	"io"

	"github.com/cuvs-go/cuvs/safe"
	"github.com/cuvs-go/cuvs/safe/internal/kit"
)

// SerializeTo writes the index to w in the format Serialize writes, and
// returns the bytes written (cuVS writes only to file names: through a
// named pipe in a private temporary directory, copied to w as it comes).
func (idx *IVFFlatIndex) SerializeTo(res *Resources, w io.Writer) (int64, error) {
	if idx == nil {
		return 0, kit.NilIndex("multigpu.IVFFlatIndex.SerializeTo")
	}
	if err := idx.life.Built("multigpu.IVFFlatIndex.SerializeTo"); err != nil { // a zero index says so, before its arguments are checked
		return 0, err
	}
	return kit.SerializeSealed("multigpu.IVFFlatIndex.SerializeTo", w, func(path string) error { return idx.Serialize(res, path) })
}

// DeserializeIVFFlatFrom reads an index Serialize or SerializeTo wrote from r,
// to its end, as DeserializeIVFFlat does (r is copied into an in-memory file;
// safe.MaxBytes bounds it).
func DeserializeIVFFlatFrom(res *Resources, r io.Reader, opts ...safe.DeserializeOption) (*IVFFlatIndex, error) {
	return kit.DeserializeFrom("multigpu.DeserializeIVFFlatFrom", r, opts, func(path string) (*IVFFlatIndex, error) { return DeserializeIVFFlat(res, path) })
}

// DistributeIVFFlatFrom is DistributeIVFFlat of a single-GPU index read from r.
func DistributeIVFFlatFrom(res *Resources, r io.Reader, opts ...safe.DeserializeOption) (*IVFFlatIndex, error) {
	return kit.DeserializeFrom("multigpu.DistributeIVFFlatFrom", r, opts, func(path string) (*IVFFlatIndex, error) { return DistributeIVFFlat(res, path) })
}

// SerializeTo writes the index to w in the format Serialize writes, and
// returns the bytes written (cuVS writes only to file names: through a
// named pipe in a private temporary directory, copied to w as it comes).
func (idx *IVFPQIndex) SerializeTo(res *Resources, w io.Writer) (int64, error) {
	if idx == nil {
		return 0, kit.NilIndex("multigpu.IVFPQIndex.SerializeTo")
	}
	if err := idx.life.Built("multigpu.IVFPQIndex.SerializeTo"); err != nil { // a zero index says so, before its arguments are checked
		return 0, err
	}
	return kit.SerializeSealed("multigpu.IVFPQIndex.SerializeTo", w, func(path string) error { return idx.Serialize(res, path) })
}

// DeserializeIVFPQFrom reads an index Serialize or SerializeTo wrote from r,
// to its end, as DeserializeIVFPQ does (r is copied into an in-memory file;
// safe.MaxBytes bounds it).
func DeserializeIVFPQFrom(res *Resources, r io.Reader, opts ...safe.DeserializeOption) (*IVFPQIndex, error) {
	return kit.DeserializeFrom("multigpu.DeserializeIVFPQFrom", r, opts, func(path string) (*IVFPQIndex, error) { return DeserializeIVFPQ(res, path) })
}

// DistributeIVFPQFrom is DistributeIVFPQ of a single-GPU index read from r.
func DistributeIVFPQFrom(res *Resources, r io.Reader, opts ...safe.DeserializeOption) (*IVFPQIndex, error) {
	return kit.DeserializeFrom("multigpu.DistributeIVFPQFrom", r, opts, func(path string) (*IVFPQIndex, error) { return DistributeIVFPQ(res, path) })
}

// SerializeTo writes the index to w in the format Serialize writes, and
// returns the bytes written (cuVS writes only to file names: through a
// named pipe in a private temporary directory, copied to w as it comes).
func (idx *CagraIndex) SerializeTo(res *Resources, w io.Writer) (int64, error) {
	if idx == nil {
		return 0, kit.NilIndex("multigpu.CagraIndex.SerializeTo")
	}
	if err := idx.life.Built("multigpu.CagraIndex.SerializeTo"); err != nil { // a zero index says so, before its arguments are checked
		return 0, err
	}
	return kit.SerializeSealed("multigpu.CagraIndex.SerializeTo", w, func(path string) error { return idx.Serialize(res, path) })
}

// DeserializeCagraFrom reads an index Serialize or SerializeTo wrote from r,
// to its end, as DeserializeCagra does (r is copied into an in-memory file;
// safe.MaxBytes bounds it).
func DeserializeCagraFrom(res *Resources, r io.Reader, opts ...safe.DeserializeOption) (*CagraIndex, error) {
	return kit.DeserializeFrom("multigpu.DeserializeCagraFrom", r, opts, func(path string) (*CagraIndex, error) { return DeserializeCagra(res, path) })
}

// DistributeCagraFrom is DistributeCagra of a single-GPU index read from r.
func DistributeCagraFrom(res *Resources, r io.Reader, opts ...safe.DeserializeOption) (*CagraIndex, error) {
	return kit.DeserializeFrom("multigpu.DistributeCagraFrom", r, opts, func(path string) (*CagraIndex, error) { return DistributeCagra(res, path) })
}
