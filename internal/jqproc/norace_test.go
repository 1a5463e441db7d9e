//go:build !race

package jqproc

// raceShadow: no shadow memory without the race detector (see race_test.go).
const raceShadow = 0
