package k8sjob

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/catalog"
	"github.com/agentflow/agentflow/internal/tools"
)

// spec is the catalog entry the tests call.
var spec = agent.Tool{Name: "report", Kind: KindName, Parameters: json.RawMessage(params),
	Config: json.RawMessage(`{"namespace":"jobs","image":"busybox:1.37","args":["{{args.query}}"],"timeout_seconds":30}`)}

var call = tools.Call{TenantID: "acme", JobID: "j1", CallID: "c1", Args: json.RawMessage(`{"query":"q"}`)}

// cluster is client-go's fake clientset with the kind over it; the test
// plays the Job controller and the kubelet.
type cluster struct {
	client *fake.Clientset
	reg    *tools.Registry
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	allow, err := ParseAllow("acme=jobs/busybox:*")
	require.NoError(t, err)
	c := &cluster{client: fake.NewClientset()}
	c.reg, err = tools.NewRegistry(tools.Deps{}, Kind(Options{Client: c.client, Allow: allow, Poll: 5 * time.Millisecond}))
	require.NoError(t, err)
	return c
}

// run calls the tool in the background.
func (c *cluster) run(ctx context.Context, call tools.Call) <-chan result {
	out := make(chan result, 1)
	go func() {
		o, err := c.reg.Execute(ctx, spec, call)
		out <- result{o, err}
	}()
	return out
}

type result struct {
	out tools.Output
	err error
}

// created waits for the call's Job.
func (c *cluster) created(t *testing.T) *batchv1.Job {
	t.Helper()
	name := Target{TenantID: call.TenantID, JobID: call.JobID, CallID: call.CallID}.Name()
	var job *batchv1.Job
	require.Eventually(t, func() bool {
		var err error
		job, err = c.client.BatchV1().Jobs("jobs").Get(context.Background(), name, metav1.GetOptions{})
		return err == nil
	}, 5*time.Second, 5*time.Millisecond)
	return job
}

// finish runs the Job's pod to exitCode and marks the Job as the
// controller would.
func (c *cluster) finish(t *testing.T, job *batchv1.Job, exitCode int32, cond batchv1.JobConditionType, reason string) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-x7k2p", Namespace: job.Namespace, Labels: map[string]string{"job-name": job.Name}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: containerName,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode}}}}},
	}
	_, err := c.client.CoreV1().Pods(job.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: cond, Status: corev1.ConditionTrue, Reason: reason})
	_, err = c.client.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func decode(t *testing.T, o tools.Output) Result {
	t.Helper()
	var r Result
	require.NoError(t, json.Unmarshal(o.Data, &r))
	return r
}

func creates(c *fake.Clientset) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "jobs" {
			n++
		}
	}
	return n
}

// TestRunSucceeds: the call makes its Job from the entry and the
// arguments, waits for it, and returns the exit code and the pod's logs
// (the fake's pods/log answers "fake logs").
func TestRunSucceeds(t *testing.T) {
	c := newCluster(t)
	done := c.run(context.Background(), call)
	job := c.created(t)
	require.Equal(t, []string{"q"}, job.Spec.Template.Spec.Containers[0].Args)
	require.Equal(t, "acme", job.Labels[LabelTenant])
	c.finish(t, job, 0, batchv1.JobComplete, "")
	r := <-done
	require.NoError(t, r.err)
	res := decode(t, r.out)
	require.Equal(t, StatusSucceeded, res.Status)
	require.Equal(t, int32(0), *res.ExitCode)
	require.Equal(t, "fake logs", res.Logs)
	require.Contains(t, r.out.Text, "succeeded with exit code 0")
}

// TestRunFailed: a container that fails is a result the model reads,
// with its exit code; not an error the activity would retry.
func TestRunFailed(t *testing.T) {
	c := newCluster(t)
	done := c.run(context.Background(), call)
	c.finish(t, c.created(t), 3, batchv1.JobFailed, "BackoffLimitExceeded")
	r := <-done
	require.NoError(t, r.err)
	res := decode(t, r.out)
	require.Equal(t, StatusFailed, res.Status)
	require.Equal(t, int32(3), *res.ExitCode)
	require.Contains(t, r.out.Text, "failed with exit code 3 (BackoffLimitExceeded)")
}

// TestRetryFindsTheJob: a retried attempt of the call finds the Job the
// first one made, finished or not, and makes no second one.
func TestRetryFindsTheJob(t *testing.T) {
	c := newCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	first := <-c.run(ctx, call) // the attempt runs out of time
	require.ErrorIs(t, first.err, context.DeadlineExceeded)
	job := c.created(t) // and leaves its Job for the retry

	done := c.run(context.Background(), call)
	c.finish(t, job, 0, batchv1.JobComplete, "")
	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, StatusSucceeded, decode(t, r.out).Status)
	list, err := c.client.BatchV1().Jobs("jobs").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1, "one Job for the call")
	require.Equal(t, 2, creates(c.client), "the retry's create found the Job")

	// A Job of the call's name that another spec made is not taken.
	job, err = c.client.BatchV1().Jobs("jobs").Get(context.Background(), job.Name, metav1.GetOptions{})
	require.NoError(t, err)
	job.Annotations[AnnotationSpec] = "other"
	_, err = c.client.BatchV1().Jobs("jobs").Update(context.Background(), job, metav1.UpdateOptions{})
	require.NoError(t, err)
	r = <-c.run(context.Background(), call)
	require.ErrorContains(t, r.err, "is not this call's")
}

// TestCancelDeletesTheJob: the turn's cancel deletes the Job.
func TestCancelDeletesTheJob(t *testing.T) {
	c := newCluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := c.run(ctx, call)
	job := c.created(t)
	cancel()
	r := <-done
	require.ErrorIs(t, r.err, context.Canceled)
	_, err := c.client.BatchV1().Jobs("jobs").Get(context.Background(), job.Name, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the Job is deleted: %v", err)
	var deleted bool
	for _, a := range c.client.Actions() {
		deleted = deleted || a.GetVerb() == "delete" && a.GetResource().Resource == "jobs"
	}
	require.True(t, deleted)
}

// TestTimeoutDeletesTheJob: a Job past its deadline is reported timed
// out, with its logs, and deleted.
func TestTimeoutDeletesTheJob(t *testing.T) {
	c := newCluster(t)
	done := c.run(context.Background(), call)
	job := c.created(t)
	c.finish(t, job, 137, batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded)
	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, StatusTimedOut, decode(t, r.out).Status)
	_, err := c.client.BatchV1().Jobs("jobs").Get(context.Background(), job.Name, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the Job is deleted: %v", err)
}

// TestOperatorAllows: a call of a tenant the operator does not allow the
// entry's namespace and image makes no Job.
func TestOperatorAllows(t *testing.T) {
	c := newCluster(t)
	other := call
	other.TenantID = "other"
	r := <-c.run(context.Background(), other)
	require.ErrorContains(t, r.err, `the operator does not allow tenant "other"`)
	require.Zero(t, creates(c.client))
}

// TestCatalog: applying a catalog checks the entry against the operator's
// list for its tenant, and an entry that writes no approval policy gets
// the kind's, which asks for approval of every call.
func TestCatalog(t *testing.T) {
	c := newCluster(t)
	entry := `
tools:
  - name: report
    kind: k8s_job
    parameters: {"type":"object","properties":{"query":{"type":"string"}}}
    config: {"namespace":"jobs","image":"busybox:1.37","args":["{{args.query}}"]}
agents:
  - id: a
    model: openai:gpt-4o
    system_prompt: p
    tools: [report]
`
	cat, err := catalog.Parse(c.reg, "acme.yaml", []byte("tenant: acme\n"+entry))
	require.NoError(t, err)
	tool := cat.Tenants[0].Tools[0]
	require.Equal(t, agent.ApprovalAlways, tool.Approval)
	policy, _ := c.reg.Approval(tool, json.RawMessage(`{"query":"q"}`))
	require.Equal(t, agent.ApprovalAlways, policy)

	_, err = catalog.Parse(c.reg, "other.yaml", []byte("tenant: other\n"+entry))
	require.ErrorContains(t, err, `the operator does not allow tenant "other"`)
}
