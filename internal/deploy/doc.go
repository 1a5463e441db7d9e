// Package deploy is a worker's side of Temporal's Worker Deployment
// Versioning: the deployment and build a worker process belongs to
// (Version, from AGENTFLOW_DEPLOYMENT_NAME and AGENTFLOW_BUILD_ID), the
// options its Temporal worker polls with, the check that the server takes
// those names before the worker polls, and whether the server has
// registered the build with its task queue (Registration). Moving new
// turns from one build to the next is the operator's, in internal/rollout.
//
// It imports the Temporal SDK and nothing of agentflow's; it must not
// import the workflows, the activities, the store or the gateway.
package deploy
