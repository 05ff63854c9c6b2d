package safe

// DeserializeOption configures the Deserialize and DeserializeFrom
// functions of the index packages (bruteforce, cagra, hnsw, ivfflat,
// ivfpq, ivfsq).
type DeserializeOption func(*DeserializeLimits)

// DeserializeLimits is what the DeserializeOptions set. The zero value is
// no limit, a checksum checked where there is one and not required.
type DeserializeLimits struct {
	// MaxBytes bounds the stream's length: a longer one is refused (an
	// *ArgError naming "r" and the limit) after MaxBytes+1 bytes were
	// read, before any C call. 0 is no limit. Files are not bounded.
	MaxBytes int64
	// RequireChecksum refuses, with ErrCorruptIndex, a file or stream
	// without the bindings' checksum trailer (one cuVS wrote itself).
	RequireChecksum bool
	// Verified, if not nil, is set to whether the file or stream had the
	// checksum trailer and every byte matched it.
	Verified *bool
}

// MaxBytes refuses a stream longer than n bytes (n > 0; see
// DeserializeLimits.MaxBytes). DeserializeFrom holds the whole stream in
// memory while cuVS reads it, so a service reading indexes it did not
// write sets one.
func MaxBytes(n int64) DeserializeOption {
	return func(l *DeserializeLimits) { l.MaxBytes = n }
}

// RequireChecksum refuses a file or stream that has no checksum trailer,
// as cuVS's own serializers write them: only what the bindings wrote, and
// proved whole, loads.
func RequireChecksum() DeserializeOption {
	return func(l *DeserializeLimits) { l.RequireChecksum = true }
}

// Verified sets *v, once the file or stream is read, to whether its
// checksum was there and matched (false: a file cuVS wrote, loaded
// unproved).
func Verified(v *bool) DeserializeOption {
	return func(l *DeserializeLimits) { l.Verified = v }
}

// SerializeOption configures the Serialize and SerializeTo methods of the
// index packages whose format has a choice (cagra, vamana): what differs
// from the family's Serialize(res, path) is an option, as for Deserialize.
type SerializeOption func(*SerializeSettings)

// SerializeSettings is what the SerializeOptions set. The zero value is
// cuVS's default: the dataset is written with the index.
type SerializeSettings struct {
	// WithoutDataset writes the index without its rows (cagra: the graph
	// only; vamana: no path+".data" file). Whoever reads it gives the rows
	// back (cagra.Index.UpdateDataset).
	WithoutDataset bool
}

// WithoutDataset writes an index without its rows (see
// SerializeSettings.WithoutDataset).
func WithoutDataset() SerializeOption {
	return func(s *SerializeSettings) { s.WithoutDataset = true }
}
