package safe

// DeserializeOption configures the DeserializeFrom functions of the index
// packages (bruteforce, cagra, ivfflat, ivfsq, ivfpq).
type DeserializeOption func(*DeserializeLimits)

// DeserializeLimits is what the DeserializeOptions set. The zero value is
// no limit.
type DeserializeLimits struct {
	// MaxBytes bounds the stream's length: a longer one is refused (an
	// *ArgError naming "r" and the limit) after MaxBytes+1 bytes were
	// read, before any C call. 0 is no limit.
	MaxBytes int64
}

// MaxBytes refuses a stream longer than n bytes (n > 0; see
// DeserializeLimits.MaxBytes). DeserializeFrom holds the whole stream in
// memory while cuVS reads it, so a service reading indexes it did not
// write sets one.
func MaxBytes(n int64) DeserializeOption {
	return func(l *DeserializeLimits) { l.MaxBytes = n }
}
