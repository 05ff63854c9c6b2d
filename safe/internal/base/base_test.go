package base

import (
	"testing"
	"unicode/utf8"
)

// Quote escapes what is not valid, printable UTF-8 (a damaged file's byte
// quoted in a cuVS error text), keeping newlines, tabs and the rest.
func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, é and 日本":                         "plain text, é and 日本",
		"line one\n\tline two":                         "line one\n\tline two",
		"Invalid typestr: unrecognized byteorder \xff": `Invalid typestr: unrecognized byteorder \xff`,
		"bell \a, nul \x00, escape \x1b":               `bell \a, nul \x00, escape \x1b`,
		"cut \xe6\x97":                                 `cut \xe6\x97`,
		"\u200b zero width":                            `\u200b zero width`,
	} {
		got := Quote(in)
		if got != want || !utf8.ValidString(got) {
			t.Errorf("Quote(%q) = %q, want %q", in, got, want)
		}
	}
}
