package k8sjob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"go.uber.org/zap"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/tools"
)

// Statuses of a finished call.
const (
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusTimedOut  = "timed_out"
)

// Result is a call's structured result (tools.Output.Data).
type Result struct {
	Job       string `json:"job"`
	Namespace string `json:"namespace"`
	Status    string `json:"status"`
	// ExitCode is the container's, when it ran to an end.
	ExitCode *int32 `json:"exit_code,omitempty"`
	// Reason and Message are Kubernetes' account of a failure.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Logs are the end of the container's logs, at most
	// Options.MaxLogBytes; LogsTruncated says there was more before.
	Logs          string `json:"logs"`
	LogsTruncated bool   `json:"logs_truncated,omitempty"`
}

// deadlineGrace is how long past its activeDeadlineSeconds a Job not yet
// marked finished is waited for before the call deletes it itself.
const deadlineGrace = 15 * time.Second

// textTail is how much of the logs the model reads in the call's text;
// the rest is in the data, by reference when large.
const textTail = 2000

type tool struct {
	opts   Options
	spec   agent.Tool
	config Config
	deps   tools.Deps
}

// Run makes the call's Job, or finds the one an earlier attempt made,
// waits for it and returns its outcome. The turn's cancel deletes it.
func (t *tool) Run(ctx context.Context, call tools.Call) (tools.Output, error) {
	// The operator's list is checked again: it may have narrowed since
	// the catalog was applied.
	c := t.config
	if err := t.opts.Allow.Check(call.TenantID, c.Namespace, c.ServiceAccount, c.Image); err != nil {
		return tools.Output{}, err
	}
	target := Target{TenantID: call.TenantID, JobID: call.JobID, CallID: call.CallID, Tool: t.spec.Name}
	want, err := Manifest(c, target, call.Args)
	if err != nil {
		return tools.Output{}, err
	}
	log := t.deps.Logger.With(zap.String("tenant", call.TenantID), zap.String("job_id", call.JobID),
		zap.String("call_id", call.CallID), zap.String("namespace", c.Namespace), zap.String("k8s_job", want.Name))
	job, err := t.ensure(ctx, want, log)
	if err != nil {
		return tools.Output{}, err
	}
	res, err := t.wait(ctx, job, call, log)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			// The turn cancelled the call: the Job goes too. An attempt
			// out of time (DeadlineExceeded) leaves it for the retry.
			t.remove(ctx, job, log)
		}
		return tools.Output{}, err
	}
	if res.Status == StatusTimedOut {
		t.remove(ctx, job, log)
	}
	return output(res)
}

// ensure creates want, or returns the Job of its name an earlier attempt
// of the call created.
func (t *tool) ensure(ctx context.Context, want *batchv1.Job, log *zap.Logger) (*batchv1.Job, error) {
	jobs := t.opts.Client.BatchV1().Jobs(want.Namespace)
	job, err := jobs.Create(ctx, want, metav1.CreateOptions{})
	if err == nil {
		log.Info("k8s job created", zap.String("image", t.config.Image))
		return job, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create job %s/%s: %w", want.Namespace, want.Name, err)
	}
	job, err = jobs.Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get job %s/%s: %w", want.Namespace, want.Name, err)
	}
	if job.Annotations[AnnotationSpec] != want.Annotations[AnnotationSpec] {
		return nil, agent.Errorf(agent.CodeConflict, "job %s/%s exists and is not this call's (another spec)", want.Namespace, want.Name)
	}
	if job.DeletionTimestamp != nil {
		// Cancelled earlier and not gone yet: the next attempt makes it
		// anew.
		return nil, fmt.Errorf("job %s/%s is being deleted", want.Namespace, want.Name)
	}
	log.Info("k8s job found: an earlier attempt created it")
	return job, nil
}

// wait polls the Job until it finishes, or is past its deadline, or ctx
// ends.
func (t *tool) wait(ctx context.Context, job *batchv1.Job, call tools.Call, log *zap.Logger) (Result, error) {
	jobs := t.opts.Client.BatchV1().Jobs(job.Namespace)
	deadline := started(job, t.deps.Now()).Add(time.Duration(t.config.TimeoutSeconds)*time.Second + deadlineGrace)
	ticker := time.NewTicker(t.opts.Poll)
	defer ticker.Stop()
	said := ""
	for {
		if status, reason, message := finished(job); status != "" {
			res := t.collect(ctx, job, log)
			res.Status, res.Reason, res.Message = status, reason, message
			log.Info("k8s job finished", zap.String("status", status), zap.String("reason", reason))
			return res, nil
		}
		if t.deps.Now().After(deadline) {
			res := t.collect(ctx, job, log)
			res.Status, res.Reason = StatusTimedOut, "DeadlineExceeded"
			res.Message = fmt.Sprintf("the job did not finish within %d s", t.config.TimeoutSeconds)
			return res, nil
		}
		if s := phase(job); s != said {
			call.Progress(fmt.Sprintf("job %s: %s", job.Name, s))
			said = s
		}
		select {
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case <-ticker.C:
		}
		got, err := jobs.Get(ctx, job.Name, metav1.GetOptions{})
		switch {
		case err == nil:
			job = got
		case ctx.Err() != nil:
			return Result{}, ctx.Err()
		case apierrors.IsNotFound(err):
			return Result{}, fmt.Errorf("job %s/%s was deleted before it finished", job.Namespace, job.Name)
		default:
			// The API server may be away for a moment: the Job runs on.
			log.Warn("k8s job not read; trying again", zap.Error(err))
		}
	}
}

// started is when the Job's deadline runs from.
func started(job *batchv1.Job, now time.Time) time.Time {
	switch {
	case job.Status.StartTime != nil:
		return job.Status.StartTime.Time
	case !job.CreationTimestamp.IsZero():
		return job.CreationTimestamp.Time
	}
	return now
}

// finished returns the Job's outcome from its conditions; "" while it
// runs.
func finished(job *batchv1.Job) (status, reason, message string) {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return StatusSucceeded, c.Reason, c.Message
		case batchv1.JobFailed:
			if c.Reason == batchv1.JobReasonDeadlineExceeded {
				return StatusTimedOut, c.Reason, c.Message
			}
			return StatusFailed, c.Reason, c.Message
		}
	}
	return "", "", ""
}

func phase(job *batchv1.Job) string {
	if job.Status.Active > 0 {
		return "running"
	}
	return "pending"
}

// collect reads the exit code and the end of the logs of the Job's
// latest pod. What cannot be read is said in the result, not failed on:
// the Job's outcome is known either way.
func (t *tool) collect(ctx context.Context, job *batchv1.Job, log *zap.Logger) Result {
	res := Result{Job: job.Name, Namespace: job.Namespace}
	pods, err := t.opts.Client.CoreV1().Pods(job.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job.Name})
	if err != nil || len(pods.Items) == 0 {
		log.Warn("k8s job's pod not found", zap.Error(err))
		res.Logs = "(no pod of the job was found: no logs)"
		return res
	}
	pod := pods.Items[0]
	for _, p := range pods.Items[1:] {
		if p.CreationTimestamp.After(pod.CreationTimestamp.Time) {
			pod = p
		}
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == containerName && s.State.Terminated != nil {
			res.ExitCode = new(s.State.Terminated.ExitCode)
		}
	}
	res.Logs, res.LogsTruncated, err = t.logs(ctx, pod)
	if err != nil {
		log.Warn("k8s job's logs not read", zap.String("pod", pod.Name), zap.Error(err))
		res.Logs = "(the logs could not be read)"
	}
	return res
}

// logs reads the container's logs through the pods/log API, keeping the
// last Options.MaxLogBytes.
func (t *tool) logs(ctx context.Context, pod corev1.Pod) (string, bool, error) {
	stream, err := t.opts.Client.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: containerName}).Stream(ctx)
	if err != nil {
		return "", false, err
	}
	defer stream.Close()
	tail := &tailBuffer{max: t.opts.MaxLogBytes}
	if _, err := io.Copy(tail, stream); err != nil {
		return "", false, err
	}
	return string(tail.buf), tail.cut, nil
}

// remove deletes the Job and its pods, even when ctx is cancelled.
func (t *tool) remove(ctx context.Context, job *batchv1.Job, log *zap.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	background := metav1.DeletePropagationBackground
	err := t.opts.Client.BatchV1().Jobs(job.Namespace).Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: &background})
	if err != nil && !apierrors.IsNotFound(err) {
		// The Job ends by its own deadline all the same.
		log.Warn("k8s job not deleted", zap.Error(err))
		return
	}
	log.Info("k8s job deleted")
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	buf []byte
	cut bool
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
		b.cut = true
	}
	return len(p), nil
}
