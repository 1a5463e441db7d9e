// Package devstack starts a private PostgreSQL server, the Temporal dev
// server and an S3-compatible object store for the demo, `task up`, `starter stack` (which `task test` and
// `task bench` run under) and the integration tests, and stops them
// cleanly. The dev server starts with agentflow's search attributes
// registered and the settings of [DynamicConfig], the same as
// deploy/temporal-dynamicconfig.yaml gives a real server.
//
// It must not import the store, the workflows or the server: it starts the
// servers they use.
//
// Nothing here is for production: Postgres runs with trust authentication and
// (unless Options.Durable) fsync off, and the dev server is the
// single-process Temporal shipped in the `temporal` CLI (v1.5.1, pinned by
// tools/go.mod and built once into .bin/temporal by [TemporalCLI]). With
// Options.TemporalServer the real server (go.temporal.io/server, same
// pinning) runs on the stack's Postgres instead, as
// internal/topology does for the production topology. The point is that a fresh checkout on a
// machine with the Debian `postgresql` package and Go can run everything
// without Docker, network services or manual setup.
//
// Both servers are child processes of the caller, each in its own process
// group (so a terminal's Ctrl-C reaches the caller, which then stops them in
// order) and with a parent-death signal (so they do not outlive a caller that
// is killed). Their output goes to log files in the state folder; a failed
// start returns an error that quotes the tail of the log. An exclusive file
// lock per service on the state folder keeps two stacks from sharing one data
// folder, and lets a new run recognise and stop a Postgres left behind by a
// crashed one.
//
// Every TCP listener the started servers open is reported
// ([Stack.Listeners], [Stack.PlatformAddrs]), read from the processes
// themselves: the dev server's metrics (on a port the stack picks, since
// the dev server would pick one nobody knows) and its internal services'
// ports as well as its frontend's, Postgres's and the real server's. The
// callers that run agentflow on a stack (the starter, internal/topology,
// internal/testserver) close them all to tools, since an operator who
// opens loopback to tools would otherwise open them too.
//
// The object store is gofakes3 (github.com/johannesboyne/gofakes3) over
// its file backend on the state folder's s3/ folder, served in the
// caller's process on a loopback port with the bucket ObjectStoreBucket
// ([Stack.ObjectStore] is its configuration): the demo and `task up` keep
// large blobs there as a production deployment keeps them on S3. Like the
// others it is one of the platform's listeners, closed to tools. It
// checks no signature; nothing here is for production.
//
// When DATABASE_URL or a Temporal address is given, the corresponding server
// is not started and the given one is used: [Stack.CreateDatabase] then
// creates databases on that server.
//
// Tests use the subpackage devtest, which starts one stack per test binary
// (or reuses the one named by the AGENTFLOW_TEST_* variables that [Env]
// produces) and hands each test its own database.
package devstack
