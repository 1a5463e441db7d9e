package k8sjob

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// Allow is the operator's allow list (AGENTFLOW_K8S_JOBS): per tenant, the
// namespaces, service accounts and images its Jobs may use. A catalog can
// only pick within it. The zero Allow allows nothing.
type Allow struct {
	rules map[string][]rule // tenant ("*": every tenant) → rules
}

// rule allows Jobs in one namespace, with one service account (""
// none: the namespace's default; "*" any), of the images that match.
type rule struct {
	namespace, serviceAccount, image string
}

// ParseAllow reads the operator's allow list:
//
//	<tenant>=<rule>[+<rule>…],…
//	rule: <namespace>[:<service account>]/<image>
//
// <tenant> is a tenant id or * for every tenant; <image> is an image
// reference, or a prefix ending in * (ghcr.io/acme/*); a rule without a
// service account allows only the namespace's default one, and :* any.
// For example "acme=acme-jobs:runner/ghcr.io/acme/*,*=agent-jobs/busybox:1.37".
func ParseAllow(s string) (Allow, error) {
	a := Allow{rules: map[string][]rule{}}
	for _, entry := range words.ListEntries(s) {
		tenant, rules, ok := strings.Cut(entry, "=")
		tenant = strings.TrimSpace(tenant)
		if !ok || tenant == "" {
			return Allow{}, fmt.Errorf("%q: want <tenant>=<namespace>[:<service account>]/<image>[+…]", entry)
		}
		for _, r := range strings.Split(rules, "+") {
			parsed, err := parseRule(strings.TrimSpace(r))
			if err != nil {
				return Allow{}, fmt.Errorf("tenant %s: %w", tenant, err)
			}
			a.rules[tenant] = append(a.rules[tenant], parsed)
		}
	}
	return a, nil
}

func parseRule(s string) (rule, error) {
	scope, image, ok := strings.Cut(s, "/")
	if !ok || image == "" {
		return rule{}, fmt.Errorf("%q: want <namespace>[:<service account>]/<image>", s)
	}
	ns, sa, _ := strings.Cut(scope, ":")
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return rule{}, fmt.Errorf("%q: namespace %q: %s", s, ns, strings.Join(errs, "; "))
	}
	if sa != "" && sa != "*" {
		if errs := validation.IsDNS1123Subdomain(sa); len(errs) > 0 {
			return rule{}, fmt.Errorf("%q: service account %q: %s", s, sa, strings.Join(errs, "; "))
		}
	}
	if strings.ContainsAny(image, " \t") || strings.Contains(strings.TrimSuffix(image, "*"), "*") {
		return rule{}, fmt.Errorf("%q: image %q: an image reference, or a prefix ending in *", s, image)
	}
	return rule{namespace: ns, serviceAccount: sa, image: image}, nil
}

// Empty reports whether the list allows nothing: the kind is then not
// offered at all.
func (a Allow) Empty() bool { return len(a.rules) == 0 }

// Check returns nil when the operator lets tenant run image in namespace
// as serviceAccount ("" the namespace's default), else an agent.CodeInvalid
// error that says so.
func (a Allow) Check(tenant, namespace, serviceAccount, image string) error {
	for _, t := range []string{tenant, "*"} {
		for _, r := range a.rules[t] {
			if r.allows(namespace, serviceAccount, image) {
				return nil
			}
		}
	}
	who := "the namespace's default service account"
	if serviceAccount != "" {
		who = "service account " + serviceAccount
	}
	return agent.Errorf(agent.CodeInvalid, "the operator does not allow tenant %q Jobs of image %q in namespace %q with %s (AGENTFLOW_K8S_JOBS)", tenant, image, namespace, who)
}

func (r rule) allows(namespace, serviceAccount, image string) bool {
	if r.namespace != namespace {
		return false
	}
	if r.serviceAccount != "*" && r.serviceAccount != serviceAccount {
		return false
	}
	if prefix, ok := strings.CutSuffix(r.image, "*"); ok {
		return strings.HasPrefix(image, prefix)
	}
	return r.image == image
}
