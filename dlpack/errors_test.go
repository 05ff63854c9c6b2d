package dlpack_test

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/cuvs-go/cuvs/dlpack"
)

// Every refusal of an argument, whatever its kind, is
// dlpack.ErrInvalidArgument (which is safe.ErrInvalidArgument: one
// taxonomy across dlpack and safe); a borrow refused because the memory
// is in use is not.
func TestRefusalsAreInvalidArgument(t *testing.T) {
	buf := make([]float32, 8)
	p := unsafe.Pointer(&buf[0])
	second := func(_ any, err error) error { return err }
	expired := func() error {
		m, _ := dlpack.NewHostMatrix(buf, 2, 4)
		v, _ := m.View()
		c := dlpack.Begin("test")
		if _, err := c.In(&v); err != nil {
			t.Fatal(err)
		}
		c.End()
		return v.Err()
	}
	aliased := func() error {
		c := dlpack.Begin("test")
		defer c.End()
		m, err := dlpack.FromRawPartsMut(p, dlpack.HostDevice, []int64{8}, nil, dlpack.Float32)
		if err != nil {
			t.Fatal(err)
		}
		m2 := m
		if _, err := c.Out(&m); err != nil {
			t.Fatal(err)
		}
		_, err = c.Out(&m2)
		return err
	}
	for _, c := range []struct {
		name string
		kind error
		err  error
	}{
		{"negative extent", dlpack.ErrInvalidMetadata, second(dlpack.NewHostMatrix(buf, -1, 4))},
		{"short data", dlpack.ErrInvalidMetadata, second(dlpack.NewHostMatrix(buf, 3, 4))},
		{"negative shape", dlpack.ErrInvalidMetadata, second(dlpack.FromRawParts(p, dlpack.HostDevice, []int64{-2}, nil, dlpack.Float32))},
		{"strides/rank", dlpack.ErrStridesRank, second(dlpack.FromRawParts(p, dlpack.HostDevice, []int64{2, 4}, []int64{1}, dlpack.Float32))},
		{"bad stride", dlpack.ErrAliased, second(dlpack.FromRawPartsMut(p, dlpack.HostDevice, []int64{2, 4}, []int64{0, 1}, dlpack.Float32))},
		{"dtype", dlpack.ErrUnsupportedDType, second(dlpack.FromRawParts(p, dlpack.HostDevice, []int64{8}, nil, dlpack.DataType{Code: dlpack.Float, Bits: 12, Lanes: 1}))},
		{"device", dlpack.ErrUnsupportedDevice, second(dlpack.FromRawParts(p, dlpack.Device{Type: 99}, []int64{8}, nil, dlpack.Float32))},
		{"expired", dlpack.ErrExpired, expired()},
		{"aliased", dlpack.ErrAliased, aliased()},
		{"nil owner", dlpack.ErrInvalidMetadata, second((*dlpack.Owner)(nil).Retain("x"))},
		{"nil import", dlpack.ErrInvalidMetadata, second(dlpack.Import(nil))},
	} {
		if !errors.Is(c.err, c.kind) || !errors.Is(c.err, dlpack.ErrInvalidArgument) {
			t.Errorf("%s: %v is not %v and dlpack.ErrInvalidArgument", c.name, c.err, c.kind)
		}
	}

	m, _ := dlpack.NewHostMatrix(buf, 2, 4)
	v, _ := m.View()
	r, err := v.Retain("index")
	if err != nil {
		t.Fatal(err)
	}
	defer r.End()
	if err := m.Close(); !errors.Is(err, dlpack.ErrBorrowed) || errors.Is(err, dlpack.ErrInvalidArgument) {
		t.Errorf("Close of borrowed memory: %v, want ErrBorrowed and not ErrInvalidArgument", err)
	}
}
