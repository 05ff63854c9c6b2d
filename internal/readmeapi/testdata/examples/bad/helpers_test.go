package bad_test

import "github.com/cuvs-go/cuvs/safe"

func newResources() *safe.Resources {
	res, _ := safe.NewResources()
	return res
}
