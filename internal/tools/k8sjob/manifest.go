package k8sjob

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/agentflow/agentflow/internal/contract"
)

// Labels and annotations of a Job. Label values are bounded (63
// characters of a small alphabet): a value that does not fit is labelled
// by its hash, and the annotation beside it has it whole.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelTenant    = "agentflow.dev/tenant"
	LabelTurn      = "agentflow.dev/turn"
	LabelCall      = "agentflow.dev/call"
	LabelTool      = "agentflow.dev/tool"
	// AnnotationSpec is the hash of the Job's spec as the call made it:
	// a Job of the call's name without it, or with another, is not the
	// call's.
	AnnotationSpec = "agentflow.dev/spec"

	managedBy     = contract.Product
	containerName = "job"
	// ttlAfterFinished keeps a finished Job (and its logs) an hour, for
	// the retry of a call whose result was not yet stored, and for people.
	ttlAfterFinished = 3600
)

// Target says whose call a Job is for.
type Target struct {
	TenantID, JobID, CallID, Tool string
}

// Name is the Job's name for a call: derived from the tenant, the turn
// and the call id alone, so every attempt of the call names the same Job.
func (t Target) Name() string {
	h := sha256.Sum256([]byte(t.TenantID + "\x00" + t.JobID + "\x00" + t.CallID))
	return "af-" + hex.EncodeToString(h[:])[:24]
}

// Manifest returns the Job a call of the entry configured by c runs, with
// the model's arguments args (a JSON object) in its args and env.
func Manifest(c Config, t Target, args json.RawMessage) (*batchv1.Job, error) {
	var values map[string]json.RawMessage
	if err := json.Unmarshal(args, &values); err != nil {
		return nil, invalid("arguments: %v", err)
	}
	container := corev1.Container{
		Name:    containerName,
		Image:   c.Image,
		Command: c.Command,
		// The logs end in the reason on failure, for the model to read.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: new(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
	for _, a := range c.Args {
		v, err := expand(a, values)
		if err != nil {
			return nil, err
		}
		container.Args = append(container.Args, v)
	}
	for _, e := range c.Env {
		v, err := expand(e.Value, values)
		if err != nil {
			return nil, err
		}
		container.Env = append(container.Env, corev1.EnvVar{Name: e.Name, Value: v})
	}
	res, err := c.Resources.requirements()
	if err != nil {
		return nil, err
	}
	container.Resources = res

	labels := map[string]string{
		LabelManagedBy: managedBy,
		LabelTenant:    labelValue(t.TenantID),
		LabelTurn:      labelValue(t.JobID),
		LabelCall:      labelValue(t.CallID),
		LabelTool:      labelValue(t.Tool),
	}
	annotations := map[string]string{
		LabelTenant: t.TenantID, LabelTurn: t.JobID, LabelCall: t.CallID, LabelTool: t.Tool,
	}
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: t.Name(), Namespace: c.Namespace, Labels: labels, Annotations: annotations},
		Spec: batchv1.JobSpec{
			// One run: a retry is the model's to decide, with the logs.
			BackoffLimit:            new(int32(0)),
			ActiveDeadlineSeconds:   new(int64(c.TimeoutSeconds)),
			TTLSecondsAfterFinished: new(int32(ttlAfterFinished)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:      corev1.RestartPolicyNever,
					ServiceAccountName: c.ServiceAccount,
					// A pod of the namespace's default account needs no
					// API token; one that names its account may.
					AutomountServiceAccountToken: new(c.ServiceAccount != ""),
					Containers:                   []corev1.Container{container},
				},
			},
		},
	}
	spec, err := json.Marshal(job.Spec)
	if err != nil {
		return nil, err
	}
	h := sha256.Sum256(spec)
	job.Annotations[AnnotationSpec] = hex.EncodeToString(h[:16])
	return job, nil
}

// labelValue is v when it is a valid label value, else its hash.
func labelValue(v string) string {
	if len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	h := sha256.Sum256([]byte(v))
	return "sha256-" + hex.EncodeToString(h[:16])
}
