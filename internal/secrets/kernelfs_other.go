//go:build !linux

package secrets

import "os"

// kernelFS names the kernel file system f is on: none outside Linux,
// where /proc and /sys are refused by their paths only.
func kernelFS(*os.File) string { return "" }
