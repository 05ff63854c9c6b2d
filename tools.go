//go:build tools

// Package tools pins the tools that generation runs, so that `go run` uses
// the versions in go.mod and `go mod tidy` keeps them: go generate runs
// gen/, which runs `go run github.com/xlab/c-for-go` (gen/internal/cforgo).
//
// A command cannot be imported, so this file imports the packages
// c-for-go's main package imports: their modules, and with them every
// requirement the command needs, stay in go.mod and go.sum.
// gen/tools_test.go checks that `go list -tags tools -deps .` works and
// covers every package the command depends on.
package tools

import (
	_ "github.com/tj/go-spin"
	_ "github.com/xlab/c-for-go/generator"
	_ "github.com/xlab/c-for-go/parser"
	_ "github.com/xlab/c-for-go/translator"
	_ "github.com/xlab/pkgconfig/pkg"
	_ "golang.org/x/tools/imports"
	_ "gopkg.in/yaml.v2"
	_ "modernc.org/cc/v4"
)
