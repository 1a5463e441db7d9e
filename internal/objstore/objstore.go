package objstore

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/agentflow/agentflow/internal/agent"
)

// ErrNotFound is what Get and Stat return for a key with no object.
var ErrNotFound = errors.New("object not found")

// ErrUnavailable is in the chain of every other failure of a request to
// the store, beside agent.CodeUnavailable: the store is down, slow,
// refuses the credential, or cut an answer short.
var ErrUnavailable = errors.New("the object store is unavailable")

// Store is an S3-compatible bucket. It is safe for concurrent use.
type Store struct {
	client *s3.Client
	cfg    Config
}

// New builds a Store for cfg; it reaches no server (Check does).
func New(ctx context.Context, cfg Config) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if !cfg.Enabled() {
		return nil, errors.New("object store: no bucket")
	}
	httpClient := awshttp.NewBuildableClient()
	if cfg.CAFile != "" {
		pool, err := caPool(cfg.CAFile)
		if err != nil {
			return nil, err
		}
		httpClient = httpClient.WithTransportOptions(func(t *http.Transport) {
			t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		})
	}
	opts := []func(*config.LoadOptions) error{
		config.WithRegion(cfg.Region),
		config.WithHTTPClient(httpClient),
		// Callers retry (Temporal for activities): the SDK's retries
		// would stack on theirs.
		config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
	}
	if cfg.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, "")))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("object store: load AWS configuration: %w", err)
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
		// Checksums only where S3 requires them: the trailing checksums
		// the SDK sends by default are refused by several S3-compatible
		// stores (GCS, older MinIO). Put sends Content-MD5, which they
		// all check, and Get checks the SHA-256 itself.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &Store{client: client, cfg: cfg}, nil
}

func caPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("object store: read %s: %w", EnvCAFile, err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("object store: %s=%s holds no PEM certificate", EnvCAFile, file)
	}
	return pool, nil
}

// Config is the store's configuration, with its defaults.
func (s *Store) Config() Config { return s.cfg }

// Key is the content-addressed key of bytes whose SHA-256 is sum (hex):
// writing the same bytes again writes the same object.
func Key(sum string) string { return "sha256/" + sum }

// Check reaches the bucket, so that a store that is misnamed, refuses
// the credential or cannot be reached fails a process at its start.
func (s *Store) Check(ctx context.Context) error {
	_, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.cfg.Bucket)})
	if err != nil {
		return fmt.Errorf("object store: %s: %w", s.cfg, err)
	}
	return nil
}

// Put stores size bytes of body under key. body is read once; it may be
// read again only by the SDK's signing, when it is an io.Seeker (a file).
// md5sum, when given, is sent so that the store refuses bytes that are
// not those the caller hashed.
func (s *Store) Put(ctx context.Context, key string, body io.Reader, size int64, contentType string, md5sum []byte) error {
	in := &s3.PutObjectInput{
		Bucket:        aws.String(s.cfg.Bucket),
		Key:           aws.String(s.cfg.Prefix + key),
		Body:          body,
		ContentLength: aws.Int64(size),
		ContentType:   aws.String(contentType),
	}
	if len(md5sum) > 0 {
		in.ContentMD5 = aws.String(base64.StdEncoding.EncodeToString(md5sum))
	}
	if _, err := s.client.PutObject(ctx, in); err != nil {
		return s.failed("put", key, err)
	}
	return nil
}

// Info describes a stored object.
type Info struct {
	Size        int64
	ContentType string
}

// Stat describes the object under key: ErrNotFound when there is none.
func (s *Store) Stat(ctx context.Context, key string) (Info, error) {
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.cfg.Prefix + key)})
	if err != nil {
		return Info{}, s.failed("stat", key, err)
	}
	return Info{Size: aws.ToInt64(out.ContentLength), ContentType: aws.ToString(out.ContentType)}, nil
}

// Delete removes the object under key; a missing one is no error.
func (s *Store) Delete(ctx context.Context, key string) error {
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.cfg.Prefix + key)})
	if err != nil {
		if err := s.failed("delete", key, err); !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	return nil
}

// Digest is what an object's bytes must be: Get checks it.
type Digest struct {
	Size   int64
	SHA256 string // lowercase hex
}

// Get opens the object under key, whose whole bytes are want, to read
// from offset off on. The reader returns an error instead of io.EOF when
// the body ends before want.Size or runs past it, or, read from the
// start, when its SHA-256 is not want's: a cut or garbled download is
// never taken for the data. ErrNotFound when there is no object. Close
// the reader.
func (s *Store) Get(ctx context.Context, key string, off int64, want Digest) (io.ReadCloser, error) {
	if off < 0 || off > want.Size {
		return nil, fmt.Errorf("object store: get %s: offset %d outside its %d bytes", key, off, want.Size)
	}
	if off == want.Size {
		return io.NopCloser(eofReader{}), nil
	}
	in := &s3.GetObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.cfg.Prefix + key)}
	if off > 0 {
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", off))
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		return nil, s.failed("get", key, err)
	}
	r := &checkedReader{body: out.Body, key: key, want: want, n: off}
	if off == 0 {
		r.h = sha256.New()
	}
	return r, nil
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// checkedReader reads an object's body, counting and (from the start)
// hashing it, and ends with an error unless it was want.
type checkedReader struct {
	body io.ReadCloser
	key  string
	want Digest
	h    hash.Hash // nil for a range
	n    int64     // offset reached
	err  error     // sticky
}

func (r *checkedReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.body.Read(p)
	r.n += int64(n)
	if r.h != nil {
		r.h.Write(p[:n])
	}
	switch {
	case r.n > r.want.Size:
		r.err = r.unavailable("the object holds more than its %d bytes", r.want.Size)
		return 0, r.err
	case r.n == r.want.Size:
		// The last byte: checked now, since a caller that reads exactly
		// the size (io.ReadFull, io.CopyN) never asks for the end. The
		// bytes of a read that fails the check are not handed on.
		if r.h != nil {
			if got := hex.EncodeToString(r.h.Sum(nil)); got != r.want.SHA256 {
				r.err = r.unavailable("its bytes hash to sha256 %s, not %s", got, r.want.SHA256)
				return 0, r.err
			}
		}
		r.err = io.EOF
		return n, io.EOF
	case err == io.EOF: //nolint:errorlint // the body's end, never wrapped
		r.err = r.unavailable("read cut off after %d of %d bytes", r.n, r.want.Size)
		return 0, r.err
	case err != nil:
		r.err = r.unavailable("read cut off after %d of %d bytes: %v", r.n, r.want.Size, err)
		return 0, r.err
	}
	return n, nil
}

func (r *checkedReader) unavailable(format string, args ...any) error {
	return agent.WithCode(agent.CodeUnavailable, fmt.Errorf("object store: get %s: %w: "+format, append([]any{r.key, ErrUnavailable}, args...)...))
}

func (r *checkedReader) Close() error { return r.body.Close() }

// failed classifies a request's error: ErrNotFound for a missing object,
// else agent.CodeUnavailable (a store that is down, slow or refuses us is
// never data that is gone).
func (s *Store) failed(op, key string, err error) error {
	if re, ok := errors.AsType[*awshttp.ResponseError](err); ok && re.HTTPStatusCode() == http.StatusNotFound {
		return fmt.Errorf("object store: %s %s: %w", op, key, ErrNotFound)
	}
	return agent.WithCode(agent.CodeUnavailable, fmt.Errorf("object store: %s %s: %w: %w", op, key, ErrUnavailable, err))
}

// Object is a stored object as List names it.
type Object struct {
	Key      string // without Config.Prefix
	Size     int64
	Modified time.Time
}

// List lists the objects under prefix (without Config.Prefix), in key
// order: what a sweep compares with the keys PostgreSQL names, to find
// objects no row names (a write that failed after its upload) once they
// are older than any write in flight.
func (s *Store) List(ctx context.Context, prefix string) ([]Object, error) {
	var objects []Object
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: aws.String(s.cfg.Bucket), Prefix: aws.String(s.cfg.Prefix + prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.failed("list", prefix, err)
		}
		for _, o := range page.Contents {
			objects = append(objects, Object{Key: strings.TrimPrefix(aws.ToString(o.Key), s.cfg.Prefix),
				Size: aws.ToInt64(o.Size), Modified: aws.ToTime(o.LastModified)})
		}
	}
	return objects, nil
}
