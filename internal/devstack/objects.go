package devstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3afero"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/objstore"
)

// The local object store's bucket and credential. The server checks no
// signature: the credential is only what clients sign with.
const (
	ObjectStoreBucket    = contract.Product
	objectStoreAccessKey = contract.Product
	objectStoreSecretKey = "agentflow-dev-secret"
)

// objectServer is the stack's S3-compatible server: gofakes3 over a
// folder of the state folder, served in this process (it is a Go
// library, not a program), so it lives and dies with the caller like the
// stack's child processes.
type objectServer struct {
	srv  *http.Server
	addr string
	done chan error
}

// startObjects serves the object store on 127.0.0.1:port (0: a free
// one), its objects under dir/s3, with the stack's bucket created.
func (s *Stack) startObjects(dir string, port int) error {
	fs, err := s3afero.FsPath(filepath.Join(dir, "s3"), s3afero.FsPathCreateAll)
	if err != nil {
		return fmt.Errorf("object store: %w", err)
	}
	backend, err := s3afero.MultiBucket(fs)
	if err != nil {
		return fmt.Errorf("object store: %w", err)
	}
	exists, err := backend.BucketExists(ObjectStoreBucket)
	if err == nil && !exists {
		err = backend.CreateBucket(ObjectStoreBucket)
	}
	if err != nil {
		return fmt.Errorf("object store: create bucket: %w", err)
	}
	// Buckets named by tests (one each, as their databases) come into
	// being on first use.
	faker := gofakes3.New(backend, gofakes3.WithAutoBucket(true), gofakes3.WithLogger(gofakes3.DiscardLog()))
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("object store: listen: %w", err)
	}
	o := &objectServer{srv: &http.Server{Handler: faker.Server(), ReadHeaderTimeout: 10 * time.Second,
		// A client that closes a body early (a seek, a range) makes
		// gofakes3 answer twice: noise, at the logger's info level.
		ErrorLog: zap.NewStdLog(s.log)}, addr: ln.Addr().String(), done: make(chan error, 1)}
	go func() { o.done <- o.srv.Serve(ln) }()
	s.objects = o
	s.ObjectStore = ObjectStoreConfig("http://"+o.addr, ObjectStoreBucket)
	s.log.Info("object store started")
	return nil
}

// stop shuts the server down and waits for it.
func (o *objectServer) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := o.srv.Shutdown(ctx)
	if serveErr := <-o.done; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}

// ObjectStoreConfig is the local object store's configuration with its
// own bucket, for a test or a process that keeps its objects apart.
func ObjectStoreConfig(endpoint, bucket string) objstore.Config {
	return objstore.Config{Endpoint: endpoint, Bucket: bucket, PathStyle: true, Region: objstore.DefaultRegion,
		AccessKeyID: objectStoreAccessKey, SecretAccessKey: objectStoreSecretKey}
}
