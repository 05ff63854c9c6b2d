// Package dlpack lends tensors to C through the DLPack ABI, and trades tensors
// with other DLPack producers and consumers (NumPy, PyTorch, CuPy).
//
// The package never owns tensor storage: it borrows. Rust's cuvs crate ties a
// view's lifetime to a borrow at compile time; Go cannot, so the same promises
// are kept at run time, and breaking one is an error, not undefined behaviour.
//
// # Views
//
// A [View] (read-only, for inputs) or [ViewMut] (writable, for outputs)
// describes a tensor: data pointer, [Device], [DataType], shape and optional
// strides. Make one from raw parts ([FromRawParts], [FromDLTensor]), from a Go
// slice ([HostVector], [HostMatrix]), or from a foreign DLManagedTensor
// ([Import]). The constructors check everything a C consumer would trip on and
// say which field is wrong:
//
//   - a known device type and a non-negative device id (ErrUnsupportedDevice,
//     ErrInvalidMetadata);
//   - a known type code, a width in whole bytes that is legal for the code,
//     at least one lane (ErrUnsupportedDType);
//   - rank 1 to MaxRank, non-negative extents, one stride per dimension
//     (ErrInvalidMetadata, ErrStridesRank);
//   - element count, byte size and memory span without int64 overflow, and a
//     span that does not wrap the address space;
//   - a non-nil data pointer unless the tensor is empty, aligned for its
//     element type;
//   - for a writable view, no two indices reaching the same element
//     (ErrAliased).
//
// A byte offset is folded into the data pointer (cuVS ignores byte_offset).
// [View.Layout] says whether the view is row-major, column-major or strided.
//
// Your own buffer types implement [Tensor] and [TensorMut] (Rust's AsDlTensor
// and AsDlTensorMut) by returning views. [DType] constrains generic code to the
// Go element types with a DLPack mapping ([DataTypeOf]); float16 is
// github.com/x448/float16's Float16.
//
// # Calls
//
// A [Call] materializes views as DLManagedTensors in C memory for exactly one
// C call ([Begin], [Call.In], [Call.Out], [Call.End]), pinning Go memory for
// the call and allocating nothing on the Go heap. Views bound to a call expire
// when it ends ([ErrExpired]); a writable view that overlaps another view of
// the call is refused ([ErrAliased]).
//
// # Owners and borrows
//
// An [Owner] is the borrow state of one buffer. Views tied to it (see
// [View.WithOwner]) borrow it while bound to a call, shared for reading and
// exclusive for writing, or beyond a call through a [Retention] ([View.Retain],
// [Owner.Retain], [Owner.LendMut]), as when an index keeps its dataset.
// [Owner.Close] refuses while any borrow is held, with a [*BorrowedError]
// that names the holders, and expires the owner's views once it succeeds.
//
// # Interop
//
// [Import] borrows a DLManagedTensor made elsewhere (the pointer inside a
// "dltensor" capsule) and calls its deleter exactly once on [Imported.Close].
// [Export] hands a view out as a DLManagedTensor whose deleter, callable from
// any thread, releases the package's side (pin, retention, C memory) exactly
// once.
//
// All errors wrap one of the Err* values; use errors.Is, or errors.As with
// [*Error] and [*BorrowedError] for the details. The package needs only a C
// compiler and libc: C sees nothing of it but the DLPack ABI.
package dlpack
