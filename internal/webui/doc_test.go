// Package webui checks what the Temporal Web UI shows a person of
// agentflow's turns, in a real browser: its test starts the dev stack with
// its Web UI, a worker and gateway, runs turns of two tenants, and reads
// the pages headless Chromium renders (the workflow list filtered by the
// AgentflowTenant search attribute, a turn's summary, details and result,
// a turn waiting for approval, the activities' summaries in its history),
// taking a screenshot of each.
//
// It is tests only: no package imports it.
//
// The browser is Debian's chromium package; `go tool task chromium` (run
// by `go tool task test`) installs it when missing and run as root. Where
// it is missing the test skips, naming the command that installs it,
// except under CI=true, where it fails.
package webui
