package bruteforce

import "github.com/cuvs-go/cuvs/safe"

// SerializeCuVS writes idx to path exactly as cuVS's serializer does,
// without the bindings' checksum: the tests read what cuVS itself wrote.
func SerializeCuVS(idx *Index, res *safe.Resources, path string) error {
	return kind.SerializeCuVS(idx, res, path)
}
