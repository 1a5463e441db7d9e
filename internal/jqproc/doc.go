// Package jqproc runs jq programs (github.com/itchyny/gojq) in child
// processes whose memory the kernel caps, at most a few at once.
//
// Of agentflow's it imports only internal/childproc: it must not import the
// tools or the pipeline, which call it.
//
// # Why a child process
//
// gojq has no memory limit of its own, and a few bytes of jq build
// gigabytes: reduce range(29) as $i ("a"; . + .) doubles a string to
// 512 MiB, def f: [f]; f nests arrays until the process is gone, and
// "abc" * 1e8 asks for 300 MB in one allocation. A deadline does not help
// (one builtin allocates before anyone looks at the clock), a check of
// value sizes would have to sit inside every gojq builtin, and a goroutine
// cannot be stopped from outside. A process can: its memory is capped by
// the kernel and it is killed at its deadline, and what dies with it is
// one program, not the worker that ran it.
//
// # The same executable, re-executed, its memory capped
//
// A child is the parent's own executable (/proc/self/exe) started with
// AGENTFLOW_JQ_CHILD_BUDGET in its environment; this package's init sees
// the variable and serves jq programs instead of returning. The child
// caps its memory (RLIMIT_DATA to what it maps at start plus
// Options.Memory, and the Go runtime's soft limit to the budget) before it
// reads any work. How, and why RLIMIT_DATA, is internal/childproc's, which
// code mode's programs share. A program that goes over is ended by the
// kernel's refusal, and the run's error is ErrMemory; its process is
// discarded.
//
// # The pool
//
// Starting a child costs milliseconds (an exec, the runtime's start and
// the package inits that come before this one: measured 2-3 ms for a test
// binary, 5-8 ms and 26 MiB of RSS for the worker's), a warm child's round
// trip tens of microseconds, so children that end a run cleanly wait for
// the next one, at most Concurrency of them. A child that ran out of
// memory, timed out, was cancelled or whose outputs were not all wanted
// is killed; one whose run left its heap large retires by itself. At most
// Options.Concurrency programs run at once; a Run beyond that waits for a
// slot as long as its context allows (ErrBusy).
//
// # Wire
//
// Requests and results travel in frames over two pipes (fds 3 and 4 of
// the child): a kind byte, a big-endian uint32 length, the payload.
// Values use a small binary encoding (see the tag constants) rather than
// JSON: decoding JSON into Go values is the slowest part of a round trip,
// and the binary form keeps gojq's types (int, float64, *big.Int,
// json.Number) and NaN as they were, so a program gives the same values
// in a child as it did in process.
package jqproc
