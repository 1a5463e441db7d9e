// Package program runs the short JavaScript programs of code mode: a model
// writes one program that calls the agent's tools itself, instead of one
// model round trip per call. The turn drives it; this package runs it.
//
// Of agentflow's it imports only internal/childproc: it must not import the
// tools, the activities or the workflows, which drive it.
//
// # Where it runs, and why not in the workflow
//
// The interpreter (github.com/dop251/goja, pure Go) runs in an activity,
// never in workflow code. A program can loop, allocate and take CPU for as
// long as it likes; in workflow code that would block a workflow task and
// put the worker at risk, and nothing could cap it. In an activity it runs
// in a child process of the worker, re-executed from the worker's own
// binary as jq is (see internal/childproc): the kernel caps the child's
// memory (RLIMIT_DATA), the parent kills it at its deadline, and what dies
// is one program, never the worker. Warm children wait in a pool, at most
// Options.Concurrency programs run at once, and a child whose heap grew
// retires after its run.
//
// # What a program sees
//
// The source is the body of an async function, so top-level await and
// return work. The program sees tools.<name>(args), an async function per
// tool the caller grants; data.read(ref), the data behind a ref (a tool's
// result kept by reference carries one); console.log, info, warn and
// error, captured; and input, a JSON value the caller passes (null when
// none). It sees no clock
// and no randomness of its own: Date is fixed at Input.Now and
// Math.random draws from a generator seeded with Input.Seed, and the local
// time zone is UTC. There is no require, no network, no filesystem and no
// timer. So a run is a function of its source, input, Now, Seed and the
// recorded results: the same on every worker, every time.
//
// # Durable by re-execution
//
// Run runs the program from the start every time. Its tool calls are
// numbered in the order the program makes them (0, 1, 2, …); the number
// is the key a turn records a call's result under. The
// program runs until its job queue is empty; the calls made since then
// and not yet answered are a batch. When every call of the batch has a
// recorded result, Run hands them all back (in call order: resolved, or
// rejected with the recorded error as a JavaScript Error) and runs on;
// when some have none, Run stops the program and returns those as
// Outcome.Pending: a Promise.all of ten calls is one batch of ten. A batch
// is answered only whole, and only once the queue is empty, so the
// order in which the program's code runs is the same on every re-run
// however many results were recorded: the numbering never shifts. A call
// whose number is recorded must be the recorded call (same tool, same
// arguments as canonical JSON); otherwise the run ends with a replay
// Error. When the program's async body settles, Run returns Done with its
// return value as JSON and the console output of the whole program.
//
// A data.read waits as a call does, in the batch of the calls made with
// it, but takes no number: the batch's refs not yet read come back as
// Outcome.Reads, and the caller runs the program again with their data
// in Input.Reads. A read is not recorded: the data behind a ref is
// content-addressed (cas://) or written once (artifact://), so reading
// it again on every run gives the same value, and recording it would
// store large data a second time to save a read.
//
// The turn's loop is then: Run → Pending → run those calls as tool calls
// (approvals, egress, secrets, events: the tool runtime's, not ours) and
// record their results → Run again with them → … → Done. A worker that
// dies mid-program loses nothing: completed calls are recorded before the
// next Run, and the next Run gets their results back without making them
// again.
//
// The cost is re-execution: a program of n sequential calls runs n+1
// times and replays n(n+1)/2 calls, O(n²) in interpreter work; a batch
// (Promise.all) costs one run however many calls it holds. Measured on a
// shared 2-core machine (load 10-15; BenchmarkSequential and
// BenchmarkSequentialInterpreter, CPU from the shell's time): 20
// sequential calls driven to Done take about 8.5 ms of interpreter CPU in
// all (21 runs, 210 replayed calls: 0.4 ms a run, 30-40 µs a replayed
// call) and 9-17 ms of wall time through one warm child, pipe included;
// 100 sequential calls take about 145 ms of CPU. Against twenty tool
// calls of milliseconds each, and the nineteen model round trips of
// seconds that code mode saves, the first is noise; a program of
// hundreds of sequential calls is better written in batches.
//
// # Limits
//
// Each limit ends the program with an *Error of Kind "limit" whose message
// names it ("limit: memory (256 MiB)"), so the model can read it and write
// a smaller program; the worker is unharmed: memory (the kernel's cap on
// the child), time (an interrupt at the deadline of each Run, and the
// child killed if it does not stop), tool calls (the total the program
// makes, recorded ones included), output (console and return value
// together, checked as they grow), source size, and data read (the bytes
// of JSON data.read brings, all reads together, and the refs read). See
// the Default and Max constants.
package program
