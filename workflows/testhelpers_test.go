package workflows

import "go.temporal.io/sdk/client"

func clientStartOptions(id string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{ID: id}
}
