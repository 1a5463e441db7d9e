package jqproc

import (
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkStart: start a child and wait until it is ready (a cold start:
// exec, the runtime's start, the package inits before this one), then
// end it.
func BenchmarkStart(b *testing.B) {
	for b.Loop() {
		c, err := start(b.Context(), DefaultMemory)
		if err != nil {
			b.Fatal(err)
		}
		c.close()
	}
}

// BenchmarkWarmRun: a small program on a warm child, round trip included.
func BenchmarkWarmRun(b *testing.B) {
	p := newPool(b, Options{})
	in := map[string]any{"count": json.Number("3"), "items": []any{
		map[string]any{"id": json.Number("1"), "price": json.Number("50")},
		map[string]any{"id": json.Number("2"), "price": json.Number("150")},
		map[string]any{"id": json.Number("3"), "price": json.Number("80")},
	}}
	prog := Program{Query: "[.items[] | select(.price < 100) | .id]", Input: in, Timeout: 5 * time.Second}
	for b.Loop() {
		if _, err := collect(b.Context(), p, prog); err != nil {
			b.Fatal(err)
		}
	}
}
