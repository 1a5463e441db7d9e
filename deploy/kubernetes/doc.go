// Package kubernetes is agentflow's cluster description: kustomize
// manifests for the gateway and worker roles (base/), optional components
// for autoscaling, Prometheus, mutual TLS, container jobs and Nexus
// endpoints (components/), and an overlay to copy
// (overlays/example). docs/operations/kubernetes.md says how to
// apply them, and docs/capacity.md how to size the fleet.
//
// The package holds no code, only the tests that keep the manifests honest
// without a cluster: each kustomization is rendered with kustomize and
// checked with kubeconform (both pinned in tools/k8s/go.mod and built into
// .bin/ on first use) against JSON Schemas made from the Kubernetes API's
// OpenAPI document, strictly, so an unknown field, a wrong type or an API
// version the cluster does not serve fails the build; and the rendered
// objects are compared with docker-compose.yml, so the two descriptions
// run the same roles with the same settings.
package kubernetes
