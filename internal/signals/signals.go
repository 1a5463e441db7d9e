// Package signals receives Temporal signals in workflow code, the two ways
// a turn and a conversation do: what a channel holds now (Drain), and each
// value as it arrives among the other things a selector waits for (On).
//
// It owns no state and no signal names (those are internal/contract's),
// and must not import anything of agentflow's: it is used by workflows
// and by internal/eventlog alike.
package signals

import "go.temporal.io/sdk/workflow"

// Drain hands each value ch already holds to take, in order, and returns
// once it holds none. A signal whose payload does not decode into T is
// skipped by the SDK, which logs it.
func Drain[T any](ch workflow.ReceiveChannel, take func(T)) {
	for {
		var v T
		if !ch.ReceiveAsync(&v) {
			return
		}
		take(v)
	}
}

// On adds ch to sel: each value is handed to take as it arrives.
//
// It receives with ReceiveAsync, not Receive: a signal whose payload does
// not decode is dropped, and Receive would then wait for the next signal
// inside the selector's callback, with everything else the selector waits
// for (a call's end, a turn's end) unseen until one came.
func On[T any](sel workflow.Selector, ch workflow.ReceiveChannel, take func(T)) {
	sel.AddReceive(ch, func(c workflow.ReceiveChannel, _ bool) {
		var v T
		if c.ReceiveAsync(&v) {
			take(v)
		}
	})
}
