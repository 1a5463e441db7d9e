// Package signals receives Temporal signals in workflow code, the three
// ways a turn and a conversation do: what a channel holds now (Drain),
// each value as it arrives among the other things a selector waits for
// (On), and each for the rest of the run in a goroutine of its own (Serve).
//
// It owns no state and no signal names (those are internal/contract's),
// and must not import anything of agentflow's: it is used by workflows
// and by internal/eventlog alike.
package signals

import (
	"encoding/json"

	"go.temporal.io/sdk/workflow"
)

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

// Serve takes each signal of ch for the rest of the run, in a workflow
// goroutine of its own: its payload decoded into T, then handed to take.
// A payload that does not decode, or that take refuses, is logged with
// the signal's name and dropped: a malformed signal never fails the
// workflow. ch is received as raw JSON so that the log says what was
// wrong; the SDK would drop such a payload without a word.
func Serve[T any](ctx workflow.Context, ch workflow.ReceiveChannel, name string, take func(workflow.Context, T) error) {
	workflow.Go(ctx, func(c workflow.Context) {
		for {
			var raw json.RawMessage
			ch.Receive(c, &raw)
			var v T
			err := json.Unmarshal(raw, &v) //workflowcheck:ignore decoding a payload is deterministic
			if err == nil {
				err = take(c, v)
			}
			if err != nil {
				workflow.GetLogger(c).Warn("signal ignored", "signal", name, "error", err.Error())
			}
		}
	})
}
