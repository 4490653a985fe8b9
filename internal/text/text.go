// Package text holds the string helpers converge's packages share.
package text

import (
	"bytes"
	"io"
	"os"
	"strings"
)

// FirstLine is s up to its first newline.
func FirstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// Indent puts prefix before each line of s, its trailing newlines cut;
// an empty s is "(empty)", so that a quoted log that said nothing shows.
func Indent(s, prefix string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		s = "(empty)"
	}
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

// ShellQuote quotes s for a POSIX shell when it needs it.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// LastLines reads up to the last n lines of file, from its last 256 KiB at
// most (an API server's log grows for the life of a shared cluster).
func LastLines(file string, n int) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	const most = 256 << 10
	cut := false
	if info, err := f.Stat(); err == nil && info.Size() > most {
		if _, err := f.Seek(-most, io.SeekEnd); err != nil {
			return nil, err
		}
		cut = true
	}
	raw, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	if cut { // its first line is the end of one
		raw = raw[bytes.IndexByte(raw, '\n')+1:]
	}
	if len(raw) == 0 {
		return nil, nil
	}
	if raw[len(raw)-1] != '\n' {
		raw = append(raw, '\n')
	}
	end := len(raw) - 1 // the final newline
	for range n {
		i := bytes.LastIndexByte(raw[:end], '\n')
		if i < 0 {
			return raw, nil
		}
		end = i
	}
	return raw[end+1:], nil
}
