package objstore

import (
	"cmp"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
)

// Environment variables of the object store (ConfigFromEnv).
const (
	EnvEndpoint  = "AGENTFLOW_S3_ENDPOINT"
	EnvBucket    = "AGENTFLOW_S3_BUCKET"
	EnvRegion    = "AGENTFLOW_S3_REGION"
	EnvAccessKey = "AGENTFLOW_S3_ACCESS_KEY_ID"
	EnvSecretKey = "AGENTFLOW_S3_SECRET_ACCESS_KEY"
	EnvPathStyle = "AGENTFLOW_S3_PATH_STYLE"
	EnvCAFile    = "AGENTFLOW_S3_CA_FILE"
	EnvPrefix    = "AGENTFLOW_S3_PREFIX"
	EnvMinBytes  = "AGENTFLOW_S3_MIN_BLOB_BYTES"
	// EnvMinPayloadBytes is the size from which a Temporal payload is
	// kept in the store (internal/payloadstore).
	EnvMinPayloadBytes = "AGENTFLOW_S3_MIN_PAYLOAD_BYTES"
)

// DefaultRegion is the region signed for when none is set: the one
// MinIO, R2 ("auto" is also accepted there) and the local stack take.
const DefaultRegion = "us-east-1"

// DefaultMinBlobBytes is the size above which a blob is kept in the
// object store (Config.MinBlobBytes): 1 MiB, one chunk of a blob kept in
// PostgreSQL (store.DefaultBlobChunkSize). Under it a blob is one row
// written in the statement that already runs, where a store would add a
// request (tens of milliseconds to a cloud store, and a PUT's fee) for
// bytes PostgreSQL holds cheaply; over it, every MiB kept in PostgreSQL
// is a MiB more of WAL, replication and backups, which the object store
// exists to spare. So with a store on, PostgreSQL holds no chunked blob.
const DefaultMinBlobBytes = 1 << 20

// DefaultMinPayloadBytes is the size (of the serialized payload) from
// which a Temporal payload is kept in the object store
// (Config.MinPayloadBytes): 256 KiB, the Temporal SDK's own default for
// external storage. The server warns of a payload over 512 KiB and
// refuses one over 2 MiB (limit.blobSize.warn and .error), gRPC refuses a
// message over 4 MiB, and a workflow's history is cut at 50 MiB: at
// 256 KiB no payload reaches the warning, a workflow task that schedules
// a dozen activities with inputs just under it still fits in one
// message, and a history holds two hundred of them before its limit,
// while the small payloads of an ordinary turn (ids, refs, previews)
// never pay a request to the store.
const DefaultMinPayloadBytes = 256 << 10

// maxPayloadThreshold bounds MinPayloadBytes: a threshold over the
// server's default limit of a payload (2 MiB) would keep in the history
// payloads the server refuses.
const maxPayloadThreshold = 2 << 20

// Config says where the object store is and how to reach it. The zero
// value is no object store.
type Config struct {
	// Endpoint is the store's URL, http:// or https:// (TLS). Env
	// AGENTFLOW_S3_ENDPOINT; default: AWS S3's endpoint for Region.
	Endpoint string
	// Bucket holds the objects; it must exist. Env AGENTFLOW_S3_BUCKET;
	// default none: no object store, and large data stays in PostgreSQL.
	Bucket string
	// Region is signed for. Env AGENTFLOW_S3_REGION; default
	// DefaultRegion.
	Region string
	// AccessKeyID and SecretAccessKey are a static credential. Env
	// AGENTFLOW_S3_ACCESS_KEY_ID and AGENTFLOW_S3_SECRET_ACCESS_KEY, both
	// or neither; default: the AWS SDK's default chain (AWS_* variables,
	// shared files, web identity, the instance's role). The secret is
	// never logged.
	AccessKeyID, SecretAccessKey string
	// PathStyle addresses the bucket in the path (endpoint/bucket/key)
	// rather than the host name (bucket.endpoint/key), as MinIO and most
	// self-hosted stores want. Env AGENTFLOW_S3_PATH_STYLE=true; default
	// false.
	PathStyle bool
	// CAFile is a PEM file of the certificate authorities that signed the
	// store's TLS certificate, beside the system's. Env
	// AGENTFLOW_S3_CA_FILE; default none.
	CAFile string
	// Prefix is put before every key, to share a bucket. Env
	// AGENTFLOW_S3_PREFIX; default none.
	Prefix string
	// MinBlobBytes: a blob larger than this (and than one chunk) is kept
	// in the object store. Env AGENTFLOW_S3_MIN_BLOB_BYTES; default
	// DefaultMinBlobBytes.
	MinBlobBytes int64
	// MinPayloadBytes: a Temporal payload (a workflow's or an activity's
	// input or result, a signal's or an update's argument) of at least
	// this many bytes, serialized, is kept in the object store and the
	// history holds a reference to it (internal/payloadstore). Env
	// AGENTFLOW_S3_MIN_PAYLOAD_BYTES; default DefaultMinPayloadBytes
	// (PayloadThreshold).
	MinPayloadBytes int64
}

// PayloadThreshold is MinPayloadBytes, or its default when unset.
func (c Config) PayloadThreshold() int64 {
	return agent.OrDefault(c.MinPayloadBytes, DefaultMinPayloadBytes)
}

// Enabled reports whether c names an object store.
func (c Config) Enabled() bool { return c.Bucket != "" }

// String describes c for logs and errors, without the secret.
func (c Config) String() string {
	cred := "default chain"
	if c.AccessKeyID != "" {
		cred = "key " + c.AccessKeyID
	}
	return fmt.Sprintf("bucket %q at %s (region %s, %s, path style %t)", c.Bucket, c.endpointName(), c.Region, cred, c.PathStyle)
}

func (c Config) endpointName() string {
	if c.Endpoint == "" {
		return "AWS S3"
	}
	return c.Endpoint
}

// ConfigFromEnv reads the object store's settings (the AGENTFLOW_S3_*
// variables). With no bucket set it returns the zero Config: no store.
func ConfigFromEnv() (Config, error) {
	c := Config{
		Endpoint:        os.Getenv(EnvEndpoint),
		Bucket:          os.Getenv(EnvBucket),
		Region:          os.Getenv(EnvRegion),
		AccessKeyID:     os.Getenv(EnvAccessKey),
		SecretAccessKey: os.Getenv(EnvSecretKey),
		CAFile:          os.Getenv(EnvCAFile),
		Prefix:          os.Getenv(EnvPrefix),
	}
	if v := os.Getenv(EnvPathStyle); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return Config{}, fmt.Errorf("%s=%q: want true or false", EnvPathStyle, v)
		}
		c.PathStyle = b
	}
	if v := os.Getenv(EnvMinBytes); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return Config{}, fmt.Errorf("%s=%q: want a positive number of bytes", EnvMinBytes, v)
		}
		c.MinBlobBytes = n
	}
	if v := os.Getenv(EnvMinPayloadBytes); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > maxPayloadThreshold {
			return Config{}, fmt.Errorf("%s=%q: want a positive number of bytes, at most %d (the server's limit of a payload)", EnvMinPayloadBytes, v, maxPayloadThreshold)
		}
		c.MinPayloadBytes = n
	}
	if !c.Enabled() {
		if c.Endpoint != "" || c.AccessKeyID != "" {
			return Config{}, fmt.Errorf("%s is set but %s is not: name the bucket, or unset both", EnvEndpoint+" or "+EnvAccessKey, EnvBucket)
		}
		return Config{}, nil
	}
	return c.withDefaults()
}

// withDefaults checks c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	c.Region = cmp.Or(c.Region, DefaultRegion)
	if c.MinBlobBytes <= 0 {
		c.MinBlobBytes = DefaultMinBlobBytes
	}
	if (c.AccessKeyID == "") != (c.SecretAccessKey == "") {
		return Config{}, fmt.Errorf("object store: set both %s and %s, or neither (the AWS default chain)", EnvAccessKey, EnvSecretKey)
	}
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return Config{}, fmt.Errorf("object store: %s=%q: want http://host[:port] or https://host[:port]", EnvEndpoint, c.Endpoint)
		}
	}
	if c.Prefix != "" && !strings.HasSuffix(c.Prefix, "/") {
		c.Prefix += "/"
	}
	return c, nil
}

// Env is c as the AGENTFLOW_S3_* assignments ("NAME=value") that
// ConfigFromEnv reads back, for a process started with c; none for no
// store.
func (c Config) Env() []string {
	if !c.Enabled() {
		return nil
	}
	env := []string{EnvBucket + "=" + c.Bucket, EnvPathStyle + "=" + strconv.FormatBool(c.PathStyle)}
	for _, v := range []struct{ name, value string }{
		{EnvEndpoint, c.Endpoint}, {EnvRegion, c.Region}, {EnvAccessKey, c.AccessKeyID}, {EnvSecretKey, c.SecretAccessKey},
		{EnvCAFile, c.CAFile}, {EnvPrefix, c.Prefix},
	} {
		if v.value != "" {
			env = append(env, v.name+"="+v.value)
		}
	}
	if c.MinBlobBytes > 0 {
		env = append(env, EnvMinBytes+"="+strconv.FormatInt(c.MinBlobBytes, 10))
	}
	if c.MinPayloadBytes > 0 {
		env = append(env, EnvMinPayloadBytes+"="+strconv.FormatInt(c.MinPayloadBytes, 10))
	}
	return env
}
