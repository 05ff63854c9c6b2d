package names

import "testing"

func TestNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Go("cuvsCagraIndex_t"), "CuvsCagraIndex_t"},
		{Go("DLTensor"), "DLTensor"},
		{Go(""), ""},
		{EnumConst("cuvsCagraSearchAlgo", "AUTO"), "CuvsCagraSearchAlgo_AUTO"},
		{EnumConst("DLDeviceType", "kDLCPU"), "DLDeviceType_kDLCPU"},
		{Field("n_lists"), "NLists"},
		{Field("M"), "M"},
		{Field("min_"), "Min"},
		{Field("_"), "X"},
		{CgoField("type"), "_type"},
		{CgoField("range"), "_range"},
		{CgoField("n_lists"), "n_lists"},
		{CgoField("string"), "string"}, // a predeclared name, not a keyword
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
