package devstack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/objstore"
)

// The local object store's bucket and credential. The server checks
// every request's signature against it.
const (
	ObjectStoreBucket    = contract.Product
	objectStoreAccessKey = contract.Product
	objectStoreSecretKey = "agentflow-dev-secret"
)

const (
	objectsStartTimeout = time.Minute
	// objectsGrace bounds SeaweedFS's shutdown after SIGTERM (about 2 s).
	objectsGrace = 15 * time.Second
)

// startObjects runs SeaweedFS (SeaweedArgs: master, volume server, filer,
// S3 API and admin in one process) on 127.0.0.1 with its state in
// Dir/seaweedfs, and waits until its S3 API has the bucket
// ObjectStoreBucket. Its ports are those of the last start while they
// are free (the master keeps its state in a folder named by its port,
// and the volume server's address in it), else new ones; a port taken
// by another process between the pick and the server's bind gets it
// started again on others.
func (s *Stack) startObjects(ctx context.Context, root string, opts Options) error {
	begin := time.Now()
	lock, err := LockFile(ctx, filepath.Join(s.Dir, "seaweedfs.lock"), false)
	if errors.Is(err, errLocked) {
		return fmt.Errorf("object store state in %s is in use by another running stack; stop it or use another folder", s.Dir)
	}
	if err != nil {
		return err
	}
	sv := &service{name: "seaweedfs", lock: lock, signal: syscall.SIGTERM, grace: objectsGrace,
		logPath: filepath.Join(s.Dir, "seaweedfs.log")}
	s.objects = sv // from here on, Stop releases the lock
	bin, err := Seaweed(ctx, opts.Progress, root)
	if err != nil {
		return err
	}
	dir := filepath.Join(s.Dir, "seaweedfs")
	for attempt := 1; ; attempt++ {
		err = s.runObjects(ctx, sv, bin, dir, opts.ObjectStorePort)
		if err == nil || opts.ObjectStorePort != 0 || attempt == portAttempts || !lostPortRace(sv) {
			break
		}
		s.log.Warn("object store lost a port to another process; starting it on others", zap.Int("attempt", attempt), zap.Error(err))
		if err := os.Remove(filepath.Join(dir, "ports")); err != nil {
			return fmt.Errorf("object store ports: %w", err)
		}
	}
	if err != nil {
		return err
	}
	s.log.Info("object store started", zap.String("endpoint", s.ObjectStore.Endpoint), zap.String("bucket", s.ObjectStore.Bucket),
		zap.Duration("took", time.Since(begin)))
	return nil
}

// runObjects starts one SeaweedFS process for sv, the S3 API on s3Port
// (0: the last start's or a free one), and waits until it is ready.
func (s *Stack) runObjects(ctx context.Context, sv *service, bin, dir string, s3Port int) error {
	ports, err := seaweedPorts(dir, s3Port)
	if err != nil {
		return err
	}
	args, err := SeaweedArgs(dir, "127.0.0.1", ports)
	if err != nil {
		return err
	}
	sv.argv = append([]string{bin}, args...)
	sv.named = ports.listeners("127.0.0.1")
	s.objectSockets = ports.Sockets()
	if err := sv.start(s.Dir, nil); err != nil {
		return err
	}
	cfg := ObjectStoreConfig("http://127.0.0.1:"+strconv.Itoa(ports.S3), ObjectStoreBucket)
	sv.ready = func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return CreateBucket(ctx, cfg)
	}
	waitCtx, cancel := context.WithTimeout(ctx, objectsStartTimeout)
	defer cancel()
	if err := poll(waitCtx, sv.proc, 100*time.Millisecond, sv.ready); err != nil {
		return err
	}
	s.ObjectStore = cfg
	return nil
}

// seaweedPorts are the ports kept in dir/ports (keptPorts), with the
// S3 API on s3Port when it is given, which must then be free. Ports whose
// Unix sockets another server holds are given up for new ones.
func seaweedPorts(dir string, s3Port int) (SeaweedPorts, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return SeaweedPorts{}, fmt.Errorf("object store folder: %w", err)
	}
	if s3Port != 0 {
		if err := portHeld(s3Port, "object store"); err != nil {
			return SeaweedPorts{}, err
		}
	}
	file := filepath.Join(dir, "ports")
	for range 10 {
		p, err := keptPorts(file, 10)
		if err != nil {
			return SeaweedPorts{}, err
		}
		ports, err := SeaweedPorts{S3: cmp.Or(s3Port, p[0]), S3GRPC: p[1], Master: p[2], MasterGRPC: p[3],
			Volume: p[4], VolumeGRPC: p[5], Filer: p[6], FilerGRPC: p[7], Admin: p[8], AdminGRPC: p[9]}.withDefaults()
		if err != nil || ports.socketsFree() {
			return ports, err
		}
		if err := os.Remove(file); err != nil {
			return SeaweedPorts{}, fmt.Errorf("object store ports: %w", err)
		}
	}
	return SeaweedPorts{}, errors.New("object store ports: every pick names a Unix socket another SeaweedFS holds in /tmp")
}

// ObjectStoreConfig is the local object store's configuration with its
// own bucket, for a test or a process that keeps its objects apart.
func ObjectStoreConfig(endpoint, bucket string) objstore.Config {
	return objstore.Config{Endpoint: endpoint, Bucket: bucket, PathStyle: true, Region: objstore.DefaultRegion,
		AccessKeyID: objectStoreAccessKey, SecretAccessKey: objectStoreSecretKey}
}

// CreateBucket creates cfg's bucket on cfg's store (path-style, with
// cfg's static credential) unless it is there already. It fails until
// the store serves, so it doubles as a SeaweedFS server's readiness
// check.
func CreateBucket(ctx context.Context, cfg objstore.Config) error {
	_, err := bucketClient(cfg).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(cfg.Bucket)})
	if code := apiErrorCode(err); code == "BucketAlreadyOwnedByYou" || code == "BucketAlreadyExists" {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create bucket %s at %s: %w", cfg.Bucket, cfg.Endpoint, err)
	}
	return nil
}

// DeleteBucket deletes cfg's bucket with its objects (the stack's
// SeaweedFS allows that; S3 does not); a missing bucket is no error.
func DeleteBucket(ctx context.Context, cfg objstore.Config) error {
	_, err := bucketClient(cfg).DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(cfg.Bucket)})
	if err != nil && apiErrorCode(err) != "NoSuchBucket" {
		return fmt.Errorf("delete bucket %s at %s: %w", cfg.Bucket, cfg.Endpoint, err)
	}
	return nil
}

// apiErrorCode is the S3 error code of err, "" when it has none: the
// code of the SDK's smithy.APIError, asked of its method so that
// smithy-go stays an indirect requirement.
func apiErrorCode(err error) string {
	if apiErr, ok := errors.AsType[interface {
		error
		ErrorCode() string
	}](err); ok {
		return apiErr.ErrorCode()
	}
	return ""
}

// bucketClient is an S3 client for cfg's store that reads nothing from
// the environment and retries nothing (a readiness poll retries).
func bucketClient(cfg objstore.Config) *s3.Client {
	return s3.New(s3.Options{
		Region:                     cmp.Or(cfg.Region, objstore.DefaultRegion),
		BaseEndpoint:               aws.String(cfg.Endpoint),
		UsePathStyle:               cfg.PathStyle,
		Credentials:                credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, ""),
		Retryer:                    aws.NopRetryer{},
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
}
