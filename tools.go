//go:build tools

// Package tools pins the tools that generation and checks run, so that
// `go run` uses the versions in go.mod.
package tools

import (
	_ "github.com/xlab/c-for-go"
)
