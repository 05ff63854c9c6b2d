// Package dlpack lends tensors to C through the DLPack ABI, and trades
// tensors with other DLPack producers and consumers (NumPy, PyTorch, CuPy).
// Package safe's functions take its views: a Go slice becomes a tensor
// without a copy.
//
//	rows := []float32{1, 2, 3, 4, 5, 6}
//	m, err := dlpack.NewHostMatrix(rows, 3, 2) // 3 × 2, row-major, borrows rows
//	if err != nil { ... }                      // a wrong length, say
//	v, _ := m.View()                           // a dlpack.View: shape, dtype, device
//	fmt.Println(v.Shape(), v.Layout())         // [3 2] row-major
//	// cagra.Build(res, m, nil), bruteforce.Build(res, m, nil), ... take m
//
// A View (read-only, for inputs) or ViewMut (writable, for outputs)
// describes a tensor: data pointer, Device, DataType, shape and optional
// strides. Make one from a Go slice (HostVector, HostMatrix), from raw
// parts (FromRawParts, FromDLTensor: the checks they make are listed
// there) or from a foreign DLManagedTensor (Import); your own buffer types
// implement Tensor and TensorMut by returning views, and DType constrains
// generic code to the Go element types with a DLPack mapping (DataTypeOf;
// float16 is github.com/x448/float16's Float16). A Call binds views for
// exactly one C call; an Owner is the borrow state of one buffer, refusing
// Close while borrowed; Export hands a view out to a DLPack consumer. All
// errors wrap one of the Err* values; use errors.Is, or errors.As with
// *Error and *BorrowedError for the details.
//
// # Design
//
// The package never owns tensor storage: it borrows. Rust's cuvs crate
// ties a view's lifetime to a borrow at compile time; Go cannot, so the
// same promises are kept at run time, and breaking one is an error, not
// undefined behaviour. A Call materializes views as DLManagedTensors in C
// memory for exactly one C call (Begin, Call.In, Call.Out, Call.End),
// pinning Go memory for the call and allocating nothing on the Go heap;
// views bound to a call expire when it ends (ErrExpired), and a writable
// view that overlaps another view of the call is refused (ErrAliased).
// Views tied to an Owner (View.WithOwner) borrow it while bound to a call,
// shared for reading and exclusive for writing, or beyond a call through a
// Retention (View.Retain, Owner.Retain, Owner.LendMut), as when an index
// keeps its dataset; Owner.Close refuses while any borrow is held, with a
// *BorrowedError that names the holders, and expires the owner's views
// once it succeeds. A byte offset is folded into the data pointer (cuVS
// ignores byte_offset); View.Layout says whether the view is row-major,
// column-major or strided. Import borrows a DLManagedTensor made elsewhere
// (the pointer inside a "dltensor" capsule) and calls its deleter exactly
// once on Imported.Close; Export's deleter, callable from any thread,
// releases the package's side (pin, retention, C memory) exactly once. The
// package needs only a C compiler and libc: C sees nothing of it but the
// DLPack ABI.
package dlpack
