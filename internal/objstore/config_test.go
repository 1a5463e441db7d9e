package objstore_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/docs"
	"github.com/agentflow/agentflow/internal/objstore"
)

func TestConfigFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want objstore.Config
		err  string
	}{
		{name: "unset: no store", want: objstore.Config{}},
		{name: "a bucket on AWS, by the default chain", env: map[string]string{objstore.EnvBucket: "data"},
			want: objstore.Config{Bucket: "data", Region: objstore.DefaultRegion, MinBlobBytes: objstore.DefaultMinBlobBytes}},
		{name: "MinIO", env: map[string]string{objstore.EnvBucket: "data", objstore.EnvEndpoint: "https://minio.internal:9000",
			objstore.EnvAccessKey: "id", objstore.EnvSecretKey: "secret", objstore.EnvPathStyle: "true", objstore.EnvPrefix: "agentflow",
			objstore.EnvMinBytes: "4194304", objstore.EnvRegion: "eu-west-1"},
			want: objstore.Config{Bucket: "data", Endpoint: "https://minio.internal:9000", AccessKeyID: "id", SecretAccessKey: "secret",
				PathStyle: true, Prefix: "agentflow/", MinBlobBytes: 4 << 20, Region: "eu-west-1"}},
		{name: "an endpoint without a bucket", env: map[string]string{objstore.EnvEndpoint: "http://127.0.0.1:9000"}, err: "AGENTFLOW_S3_BUCKET is not"},
		{name: "half a credential", env: map[string]string{objstore.EnvBucket: "data", objstore.EnvAccessKey: "id"}, err: "set both"},
		{name: "an endpoint that is no URL", env: map[string]string{objstore.EnvBucket: "data", objstore.EnvEndpoint: "minio:9000"}, err: "want http://host"},
		{name: "path style", env: map[string]string{objstore.EnvBucket: "data", objstore.EnvPathStyle: "yes"}, err: "want true or false"},
		{name: "threshold", env: map[string]string{objstore.EnvBucket: "data", objstore.EnvMinBytes: "0"}, err: "positive number of bytes"},
		{name: "payload threshold", env: map[string]string{objstore.EnvBucket: "data", objstore.EnvMinPayloadBytes: "65536"},
			want: objstore.Config{Bucket: "data", Region: objstore.DefaultRegion, MinBlobBytes: objstore.DefaultMinBlobBytes, MinPayloadBytes: 64 << 10}},
		{name: "payload threshold over the server's limit", env: map[string]string{objstore.EnvBucket: "data", objstore.EnvMinPayloadBytes: "4194304"},
			err: "at most 2097152"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, name := range []string{objstore.EnvEndpoint, objstore.EnvBucket, objstore.EnvRegion, objstore.EnvAccessKey,
				objstore.EnvSecretKey, objstore.EnvPathStyle, objstore.EnvCAFile, objstore.EnvPrefix, objstore.EnvMinBytes, objstore.EnvMinPayloadBytes} {
				t.Setenv(name, tc.env[name])
			}
			got, err := objstore.ConfigFromEnv()
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestConfigStringKeepsTheSecret(t *testing.T) {
	c := objstore.Config{Bucket: "data", AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG"}
	require.NotContains(t, c.String(), c.SecretAccessKey)
	require.Contains(t, c.String(), "AKIDEXAMPLE")
}

func TestConfigEnvRoundTrips(t *testing.T) {
	c := objstore.Config{Bucket: "data", Endpoint: "http://127.0.0.1:9000", AccessKeyID: "id", SecretAccessKey: "secret",
		PathStyle: true, Prefix: "p/", MinBlobBytes: 2 << 20, MinPayloadBytes: 128 << 10, Region: "auto"}
	for _, kv := range c.Env() {
		name, value, _ := strings.Cut(kv, "=")
		t.Setenv(name, value)
	}
	got, err := objstore.ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, c, got)
	require.Empty(t, objstore.Config{}.Env())
}

// TestReadmeRecipes: each store the "Large data on S3" section of
// docs/operations/storage.md shows is read as it says.
func TestReadmeRecipes(t *testing.T) {
	section, err := docs.Section("operations/storage.md", "Large data on S3")
	require.NoError(t, err)
	blocks := docs.Blocks(section, "sh")
	require.NotEmpty(t, blocks)
	block := blocks[0]
	var got []objstore.Config
	for _, cmd := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
		if cmd = strings.TrimSpace(cmd); cmd == "" || strings.HasPrefix(cmd, "#") {
			continue
		}
		assignments, _, ok := strings.Cut(cmd, " go run ./worker")
		require.True(t, ok, cmd)
		for _, name := range []string{objstore.EnvEndpoint, objstore.EnvBucket, objstore.EnvRegion, objstore.EnvAccessKey,
			objstore.EnvSecretKey, objstore.EnvPathStyle, objstore.EnvCAFile, objstore.EnvPrefix, objstore.EnvMinBytes, objstore.EnvMinPayloadBytes} {
			t.Setenv(name, "")
		}
		for _, kv := range strings.Fields(assignments) {
			name, value, ok := strings.Cut(kv, "=")
			require.True(t, ok, kv)
			t.Setenv(name, value)
		}
		c, err := objstore.ConfigFromEnv()
		require.NoError(t, err, cmd)
		require.True(t, c.Enabled(), cmd)
		got = append(got, c)
	}
	require.Len(t, got, 4)
	require.Equal(t, "eu-west-1", got[0].Region)
	require.Empty(t, got[0].AccessKeyID, "AWS: the default chain")
	require.True(t, got[1].PathStyle, "MinIO: path style")
	require.Equal(t, "auto", got[2].Region)
	require.Equal(t, "https://storage.googleapis.com", got[3].Endpoint)
}
