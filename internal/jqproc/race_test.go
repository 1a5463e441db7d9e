//go:build race

package jqproc

// raceShadow is how many bytes of ThreadSanitizer shadow a race-enabled
// child touches per byte of heap. ThreadSanitizer maps its shadow when the
// process starts, so RLIMIT_DATA, which counts from then, does not see it
// grow (measured: a 64 MiB budget peaked at 155 MiB).
const raceShadow = 2
