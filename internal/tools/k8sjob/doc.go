// Package k8sjob is the k8s_job tool kind: a call runs a container image
// as a Kubernetes Job, waits for it, and returns its exit status and logs
// as the tool's result.
//
// The kind is the operator's to offer: the worker adds it only when
// AGENTFLOW_K8S_JOBS names what tenants may run (Allow), and talks to the
// cluster with the operator's credentials (in-cluster, or KUBECONFIG),
// never with anything a catalog says. A catalog entry picks, within what
// the operator allows its tenant, a namespace, an image, a service
// account, the command, the arguments and environment (which may take the
// model's arguments through {{args.NAME}} placeholders), resources and a
// timeout (Config).
//
// # A call
//
// The Job's name is derived from the call (tenant, turn, call id), so a
// retried attempt of the same call finds the Job the first attempt made
// and waits for it instead of starting a second. The Job is labelled with
// the tenant, the turn and the call, and bounded by activeDeadlineSeconds
// (the entry's timeout); the call polls it until it succeeds or fails,
// reads its pod's exit code and the tail of its logs, and returns them
// (Output.Data, which the runtime keeps by cas:// reference when large).
// A container that fails is a result the model reads, not an error.
//
// The turn's cancel deletes the Job (propagation Background: the pods go
// with it), and so does the call's own timeout once the Job has not
// finished within its deadline. An attempt that runs out of time without
// being cancelled leaves the Job running for the retry to find.
//
// Calls are approval-gated by default (Kind.Approval "always"), as every
// kind whose calls change things elsewhere.
//
// This package is the only one that links client-go: the worker command
// adds the kind (internal/server.Config.ToolKinds), and nothing else in
// the module imports it.
package k8sjob
