// Package devstack starts a private PostgreSQL server, the Temporal dev
// server and an S3 server (SeaweedFS) for the demo, `task up`, `starter
// stack` (which `task test` and `task bench` run under), the production
// topology (internal/topology) and the integration tests, and stops them
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
// The servers are child processes of the caller, each in its own process
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
// ports as well as its frontend's, Postgres's, the real server's and
// SeaweedFS's. The callers that run agentflow on a stack (the starter,
// internal/topology, internal/testserver) close them all to tools, since
// an operator who opens loopback to tools would otherwise open them too.
//
// The object store is SeaweedFS (`weed mini`: master, volume server,
// filer, S3 API and admin in one process; the version pinned by
// tools/seaweedfs/go.mod, a module of its own, and built once into
// .bin/weed by [Seaweed]), with its state in the state folder's
// seaweedfs/ and the bucket ObjectStoreBucket created at start
// ([Stack.ObjectStore] is its configuration): the demo and `task up` keep
// large blobs there as a production deployment keeps them on S3, and the
// S3 tier's tests and benchmarks run against it. It is a real S3 server:
// it checks every request's SigV4 signature against the stack's
// credential, a bucket must be created before use ([CreateBucket]; the
// devtest package gives each test its own), and it implements what
// agentflow uses (objects of hundreds of MiB, ranges, multi-object
// delete). It starts in about 4 s, beside the other servers. Its ten
// ports are the platform's listeners, closed to tools, and kept across
// restarts like the real Temporal server's. [SeaweedArgs] is its command
// line, for a caller that runs it elsewhere (another address, a network
// namespace).
//
// When DATABASE_URL or a Temporal address is given, the corresponding server
// is not started and the given one is used: [Stack.CreateDatabase] then
// creates databases on that server.
//
// Tests use the subpackage devtest, which starts one stack per test binary
// (or reuses the one named by the AGENTFLOW_TEST_* variables that [Env]
// produces) and hands each test its own database.
package devstack
