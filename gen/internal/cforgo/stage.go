package cforgo

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// LibcStub is the file name of the stand-in for <stdint.h>, <stddef.h> and
// <stdbool.h> that c-for-go parses instead of the host's headers; cuvs.yml
// lists it in PARSER.IgnoredPaths. With the host's headers c-for-go would
// translate every libc typedef and macro it sees (the manifest's rules can
// only filter by name, and IgnoredPaths only by file-name suffix), and the
// output would depend on the host's libc.
const LibcStub = "cforgo_libc.h"

// The stub spells each type through the compiler's own predefined macros,
// exactly as gcc's <stdint.h> does, so the types are the host's.
const libcStub = `#ifndef CFORGO_LIBC_H
#define CFORGO_LIBC_H
typedef __INT8_TYPE__ int8_t;
typedef __INT16_TYPE__ int16_t;
typedef __INT32_TYPE__ int32_t;
typedef __INT64_TYPE__ int64_t;
typedef __UINT8_TYPE__ uint8_t;
typedef __UINT16_TYPE__ uint16_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __UINT64_TYPE__ uint64_t;
typedef __INTPTR_TYPE__ intptr_t;
typedef __UINTPTR_TYPE__ uintptr_t;
typedef __INTMAX_TYPE__ intmax_t;
typedef __UINTMAX_TYPE__ uintmax_t;
typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;
#define bool _Bool
#define true 1
#define false 0
#define NULL ((void*)0)
#endif
`

var (
	includeRx    = regexp.MustCompile(`^[ \t]*#[ \t]*include\b`)
	stdIncludeRx = regexp.MustCompile(`^[ \t]*#[ \t]*include[ \t]*<(stdint|stddef|stdbool)\.h>[ \t]*(//.*)?$`)
)

// stageHeader copies the declarations header to dst with its standard
// includes pointed at the stub (line for line, so line numbers are kept),
// and writes the stub beside it. Any other #include is an error: the header
// must be self-contained.
func stageHeader(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	lines := bytes.Split(b, []byte("\n"))
	for i, l := range lines {
		l = bytes.TrimSuffix(l, []byte("\r"))
		if !includeRx.Match(l) {
			continue
		}
		if !stdIncludeRx.Match(l) {
			return fmt.Errorf("%s:%d: %s: the declarations header may include only <stdint.h>, <stddef.h> and <stdbool.h>", src, i+1, l)
		}
		lines[i] = []byte(`#include "` + LibcStub + `"`)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(dst), LibcStub), []byte(libcStub), 0o644); err != nil {
		return err
	}
	return os.WriteFile(dst, bytes.Join(lines, []byte("\n")), 0o644)
}
