// Package pglive is the live path of turns' event logs over Postgres
// (internal/eventlog): activities publish the events a turn has accepted
// with NOTIFY on one channel (Publisher, an eventlog.Publisher), and every
// process that serves followers LISTENs on it with one connection and fans
// the batches out to its subscribers by stream id (Hub, an
// eventlog.LiveSource). A batch too large for one notification goes as a
// wake-up: its followers read it from the log.
//
// It must not import the workflows, the activities or the gateway, which
// use it.
//
// A model call that streams live first appends its batches (Publisher.Append):
// each is stored in the live_batches table and published in one statement,
// fenced per stream by the call's step and attempt (the live_fences row,
// locked by every append and claim), so that a retried attempt, or the
// turn sealing a failed call, reads exactly what followers were shown and
// no earlier attempt appends after it (Publisher.Claim). Followers read
// the stored batches past the log's end (Hub.Stored); the turn's last
// activity drops them once the log holds them, and the fence with them
// (Publisher.Forget): an attempt that holds the stream appends only while
// the fence row is its own, so a sealed call that still runs appends
// nothing after that either. A
// model call that signals its batches to its turn publishes each one
// fenced the same way, storing nothing (Publisher.PublishFenced), and a
// retried attempt fences the stream before it reads the log's head
// (Publisher.Fence): an attempt the turn has given up on, whose batches
// the turn refuses, shows followers nothing.
//
// The same path carries interruptions the other way, to workers: a
// gateway that has signalled a turn's cancellation sends its stream id
// (Interrupt), and the worker running that turn's model call stops it
// (Interrupts), which a local call's workflow task would otherwise see
// only at its next heartbeat.
//
// The path is lossy by design and never the source of truth: a
// subscriber that falls behind, or any subscriber while the listener
// reconnects, is told it lagged and reads the log. It lives apart from
// internal/eventlog so that the workflow package, which links eventlog,
// links no Postgres driver.
package pglive
