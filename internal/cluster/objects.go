package cluster

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"

	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/objstore"
)

// The S3 host's ports: SeaweedFS also serves its gRPC ports on Unix
// sockets under /tmp, which network namespaces do not separate, so two
// clusters' (and the dev stack's) servers on one machine need ports of
// their own. Each network's are apart by its index.
func seaweedPorts(index int) devstack.SeaweedPorts {
	base := 21000 + index*10
	return devstack.SeaweedPorts{
		S3: base, S3GRPC: base + 10000, Master: base + 1, MasterGRPC: base + 10001,
		Volume: base + 2, VolumeGRPC: base + 10002, Filer: base + 3, FilerGRPC: base + 10003,
		Admin: base + 4, AdminGRPC: base + 10004,
	}
}

// startObjects runs SeaweedFS on the s3 host and creates agentflow's
// bucket: the real S3-compatible server, on a host a trial can cut off.
func (c *Cluster) startObjects(ctx context.Context, root string) error {
	bin, err := devstack.Seaweed(ctx, c.progress, root)
	if err != nil {
		return err
	}
	host := c.hosts["s3"]
	ports := seaweedPorts(c.net.index)
	args, err := devstack.SeaweedArgs(filepath.Join(c.dir, "s3"), host.Addr.String(), ports)
	if err != nil {
		return err
	}
	c.s3 = host.NewProc("seaweedfs", c.dir, append([]string{bin}, args...), nil)
	if err := c.s3.Start(); err != nil {
		return err
	}
	c.ObjectStore = devstack.ObjectStoreConfig("http://"+net.JoinHostPort(host.Addr.String(), strconv.Itoa(ports.S3)), devstack.ObjectStoreBucket)
	if err := c.wait(ctx, "seaweedfs", c.s3, func(ctx context.Context) error { return devstack.CreateBucket(ctx, c.ObjectStore) }); err != nil {
		return fmt.Errorf("cluster: object store: %w", err)
	}
	return nil
}

// ObjectStoreConfig is the cluster's object store as a client configures
// it, with bucket instead of agentflow's.
func (c *Cluster) ObjectStoreConfig(bucket string) objstore.Config {
	cfg := c.ObjectStore
	cfg.Bucket = bucket
	return cfg
}
