// Package stream delivers a turn's events to the clients that follow it.
//
// The turn's event log, kept by the AgentTurn workflow and read with its
// "events" query, is the only source of truth: indices are gap-free and
// never reused, and a retried model call is fenced there. Reading the log
// costs a query round trip, so live events also travel a faster path:
// after a token batch has been accepted by the turn (its signal returned),
// CallModel publishes it with Postgres NOTIFY; every gateway process LISTENs
// once and fans the batches out to its followers. The turn's own events
// (status, usage, tool calls) and a call's last batch, which CallModel
// returns with its result instead of signalling it, travel with the next
// activity the turn schedules, which publishes them before its own work:
// by then the workflow task that logged them has completed. A follower of
// a turn it starts subscribes first (FollowNew) and so reads nothing while
// the turn runs; one that sees a gap, overflows its buffer, loses the
// listener or hears nothing for a while reads the log instead. The turn's
// completion ends every follower with a last read of the log.
//
// So a follower never waits on another (each has its own bounded buffer,
// and the fan-out never blocks), never sees an index twice or out of
// order, and needs no live path at all to be correct — only to be fast.
package stream
