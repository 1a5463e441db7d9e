package rollout

import (
	"context"

	"go.temporal.io/sdk/client"
)

// Temporal is a worker deployment on a Temporal server.
type Temporal struct {
	Client client.Client
	Name   string
}

func (t Temporal) handle() client.WorkerDeploymentHandle {
	return t.Client.WorkerDeploymentClient().GetHandle(t.Name)
}

// Current is the build new turns go to, "" when unversioned workers are.
func (t Temporal) Current(ctx context.Context) (string, error) {
	d, err := t.handle().Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	if err != nil {
		return "", err
	}
	if v := d.Info.RoutingConfig.CurrentVersion; v != nil {
		return v.BuildID, nil
	}
	return "", nil
}

// Ramp sends percent of new turns to build.
func (t Temporal) Ramp(ctx context.Context, build string, percent int) error {
	_, err := t.handle().SetRampingVersion(ctx, client.WorkerDeploymentSetRampingVersionOptions{BuildID: build, Percentage: float32(percent)})
	return err
}

// Unramp sends no new turn to build, as `go tool task deploy:unramp`
// does.
func (t Temporal) Unramp(ctx context.Context, build string) error {
	_, err := t.handle().SetRampingVersion(ctx, client.WorkerDeploymentSetRampingVersionOptions{BuildID: build, Percentage: 0})
	return err
}

// SetCurrent sends every new turn to build.
func (t Temporal) SetCurrent(ctx context.Context, build string) error {
	_, err := t.handle().SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: build})
	return err
}
