package k8sjob

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/agentflow/agentflow/internal/agent"
)

// Config is a k8s_job entry's config in the catalog.
type Config struct {
	// Namespace the Job runs in; the operator's allow list must name it.
	Namespace string `json:"namespace"`
	// Image is the container image; the operator's allow list must match
	// it. Pin a digest (…@sha256:…) for a Job that cannot change under you.
	Image string `json:"image"`
	// Command replaces the image's entrypoint; fixed by the catalog.
	Command []string `json:"command,omitempty"`
	// Args are the container's arguments; each may hold {{args.NAME}}
	// placeholders for the model's arguments.
	Args []string `json:"args,omitempty"`
	// Env are environment variables; values may hold placeholders too.
	Env []EnvVar `json:"env,omitempty"`
	// Resources are the container's requests and limits (cpu, memory,
	// ephemeral-storage), as Kubernetes quantities.
	Resources Resources `json:"resources,omitzero"`
	// TimeoutSeconds bounds the Job (activeDeadlineSeconds): 1 to
	// MaxTimeoutSeconds, default DefaultTimeoutSeconds.
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
	// ServiceAccount the pod runs as; empty: the namespace's default,
	// with no API token mounted.
	ServiceAccount string `json:"service_account,omitempty"`
}

// EnvVar is one environment variable of the container.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Resources are a container's requests and limits.
type Resources struct {
	Requests map[string]string `json:"requests,omitempty"`
	Limits   map[string]string `json:"limits,omitempty"`
}

// Bounds of a Job's timeout. A call is one attempt of ExecuteTool, whose
// timeout is the tool entry's timeout_sec (agent.Tool.CallTimeout: 120 s
// by default, at most agent.MaxToolTimeoutSec): the Job's deadline, the
// grace the call gives a Job past it and the time to read its logs must
// fit in it, or the call would end first and its retry wait for the same
// Job. So the Job's timeout is at most the call's less CallMargin, and by
// default exactly that (100 s for the default call).
const (
	CallMargin            = 20
	DefaultTimeoutSeconds = 120 - CallMargin
	MaxTimeoutSeconds     = agent.MaxToolTimeoutSec - CallMargin
)

// resourceNames are the resources a Job may request.
var resourceNames = []string{"cpu", "memory", "ephemeral-storage"}

// placeholder is an argument of the model's in args and env values.
var placeholder = regexp.MustCompile(`\{\{\s*args\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)

// parseConfig decodes and checks an entry's config; errors are
// agent.CodeInvalid and name the field.
// call is the timeout of one of the tool's calls (agent.Tool.CallTimeout).
func parseConfig(raw json.RawMessage, params json.RawMessage, call time.Duration) (Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if len(bytes.TrimSpace(raw)) == 0 {
		return c, invalid("config: namespace and image are required")
	}
	if err := dec.Decode(&c); err != nil {
		return c, invalid("config: %v", err)
	}
	if errs := validation.IsDNS1123Label(c.Namespace); len(errs) > 0 {
		return c, invalid("config.namespace %q: %s", c.Namespace, strings.Join(errs, "; "))
	}
	if c.Image == "" || strings.ContainsAny(c.Image, " \t\n") {
		return c, invalid("config.image %q: an image reference is required", c.Image)
	}
	if c.ServiceAccount != "" {
		if errs := validation.IsDNS1123Subdomain(c.ServiceAccount); len(errs) > 0 {
			return c, invalid("config.service_account %q: %s", c.ServiceAccount, strings.Join(errs, "; "))
		}
	}
	fits := int(call/time.Second) - CallMargin
	switch {
	case c.TimeoutSeconds == 0 && fits >= 1:
		c.TimeoutSeconds = fits
	case c.TimeoutSeconds < 0 || c.TimeoutSeconds > MaxTimeoutSeconds:
		return c, invalid("config.timeout_seconds %d: want 1 to %d", c.TimeoutSeconds, MaxTimeoutSeconds)
	case c.TimeoutSeconds > fits:
		return c, invalid("config.timeout_seconds %d: a call of the tool may run %d s (the entry's timeout_sec, default %d); a Job needs %d s more than its timeout: give the entry timeout_sec: %d or more",
			max(c.TimeoutSeconds, 1), int(call/time.Second), int(agent.DefaultToolTimeout/time.Second), CallMargin, max(c.TimeoutSeconds, 1)+CallMargin)
	}
	for i, s := range c.Command {
		if strings.Contains(s, "{{") {
			return c, invalid("config.command[%d]: the command is fixed; put the model's arguments in args or env", i)
		}
	}
	declared, err := properties(params)
	if err != nil {
		return c, err
	}
	for i, s := range c.Args {
		if err := checkTemplate(s, declared); err != nil {
			return c, invalid("config.args[%d]: %v", i, err)
		}
	}
	seen := map[string]bool{}
	for i, e := range c.Env {
		if errs := validation.IsEnvVarName(e.Name); len(errs) > 0 {
			return c, invalid("config.env[%d].name %q: %s", i, e.Name, strings.Join(errs, "; "))
		}
		if seen[e.Name] {
			return c, invalid("config.env[%d].name %q: given twice", i, e.Name)
		}
		seen[e.Name] = true
		if err := checkTemplate(e.Value, declared); err != nil {
			return c, invalid("config.env[%d].value: %v", i, err)
		}
	}
	if _, err := c.Resources.requirements(); err != nil {
		return c, err
	}
	return c, nil
}

// properties returns the argument names the tool's parameters declare;
// nil when the schema declares none (any name then goes).
func properties(params json.RawMessage) (map[string]bool, error) {
	if len(params) == 0 {
		return nil, nil
	}
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(params, &schema); err != nil {
		return nil, invalid("parameters: %v", err)
	}
	names := map[string]bool{}
	for name := range schema.Properties {
		names[name] = true
	}
	return names, nil
}

// checkTemplate checks that s holds no placeholder but {{args.NAME}} of a
// declared argument.
func checkTemplate(s string, declared map[string]bool) error {
	for _, m := range placeholder.FindAllStringSubmatch(s, -1) {
		if !declared[m[1]] {
			return fmt.Errorf("{{args.%s}}: the tool's parameters declare no argument %q", m[1], m[1])
		}
	}
	if strings.Contains(placeholder.ReplaceAllString(s, ""), "{{") {
		return fmt.Errorf("%q: the only placeholders are {{args.NAME}}", s)
	}
	return nil
}

// expand replaces the placeholders of s with the model's arguments: a
// string as it is, anything else as its JSON. A missing argument is an
// agent.CodeInvalid error for the model.
func expand(s string, args map[string]json.RawMessage) (string, error) {
	var missing string
	out := placeholder.ReplaceAllStringFunc(s, func(m string) string {
		name := placeholder.FindStringSubmatch(m)[1]
		v, ok := args[name]
		if !ok || string(v) == "null" {
			missing = cmp.Or(missing, name)
			return ""
		}
		var str string
		if json.Unmarshal(v, &str) == nil {
			return str
		}
		var compact bytes.Buffer
		if json.Compact(&compact, v) != nil {
			return string(v)
		}
		return compact.String()
	})
	if missing != "" {
		return "", invalid("argument %q is required", missing)
	}
	return out, nil
}

// requirements checks the resources and returns them as Kubernetes has
// them.
func (r Resources) requirements() (corev1.ResourceRequirements, error) {
	var out corev1.ResourceRequirements
	for _, part := range []struct {
		field string
		in    map[string]string
		out   *corev1.ResourceList
	}{{"requests", r.Requests, &out.Requests}, {"limits", r.Limits, &out.Limits}} {
		for name, v := range part.in {
			if !slices.Contains(resourceNames, name) {
				return out, invalid("config.resources.%s: unknown resource %q (want %s)", part.field, name, strings.Join(resourceNames, ", "))
			}
			q, err := resource.ParseQuantity(v)
			if err != nil || q.Sign() <= 0 {
				return out, invalid("config.resources.%s.%s %q: want a positive quantity such as 500m or 256Mi", part.field, name, v)
			}
			if *part.out == nil {
				*part.out = corev1.ResourceList{}
			}
			(*part.out)[corev1.ResourceName(name)] = q
		}
	}
	for name, req := range out.Requests {
		if lim, ok := out.Limits[name]; ok && req.Cmp(lim) > 0 {
			return out, invalid("config.resources: the request of %s (%s) is over its limit (%s)", name, req.String(), lim.String())
		}
	}
	return out, nil
}

func invalid(format string, a ...any) error { return agent.Errorf(agent.CodeInvalid, format, a...) }
