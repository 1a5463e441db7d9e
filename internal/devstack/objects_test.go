package devstack

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/objstore"
)

// The object store keeps its objects in the state folder: a stack
// started again on it serves them, on the same ports.
func TestStackObjectStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := stateDir(t)
	opts := Options{Dir: dir, SkipPostgres: true, SkipTemporal: true}
	s, err := Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Stop() })
	require.Equal(t, ObjectStoreBucket, s.ObjectStore.Bucket)
	endpoint := s.ObjectStore.Endpoint
	store, err := objstore.New(ctx, s.ObjectStore)
	require.NoError(t, err)
	require.NoError(t, store.Check(ctx))
	data := []byte("kept across restarts")
	sum := sha256.Sum256(data)
	want := objstore.Digest{Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
	require.NoError(t, store.Put(ctx, "k", bytes.NewReader(data), want.Size, "text/plain", nil))
	require.NoError(t, s.Stop())

	s, err = Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Stop() })
	require.Equal(t, endpoint, s.ObjectStore.Endpoint, "the ports of the last start")
	store, err = objstore.New(ctx, s.ObjectStore)
	require.NoError(t, err)
	r, err := store.Get(ctx, "k", 0, want)
	require.NoError(t, err)
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.Equal(t, data, got)
	info, err := store.Stat(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, objstore.Info{Size: want.Size, ContentType: "text/plain"}, info)
	// A range reads to the end; bytes that are not what the row says
	// end in an error, never in data taken for the object's.
	r, err = store.Get(ctx, "k", 5, want)
	require.NoError(t, err)
	got, err = io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, data[5:], got)
	bad := want
	bad.SHA256 = strings.Repeat("0", 64)
	r, err = store.Get(ctx, "k", 0, bad)
	require.NoError(t, err)
	got, err = io.ReadAll(r)
	require.ErrorIs(t, err, objstore.ErrUnavailable)
	require.ErrorContains(t, err, "its bytes hash to sha256 "+want.SHA256)
	require.Less(t, len(got), len(data))
	longer := want
	longer.Size++
	r, err = store.Get(ctx, "k", 0, longer)
	require.NoError(t, err)
	_, err = io.ReadAll(r)
	require.ErrorContains(t, err, fmt.Sprintf("read cut off after %d of %d bytes", want.Size, longer.Size))
	_, err = store.Get(ctx, "missing", 0, want)
	require.ErrorIs(t, err, objstore.ErrNotFound)

	require.NoError(t, store.Delete(ctx, "k"))
	require.NoError(t, store.Delete(ctx, "k"), "deleting what is gone is no error")
	_, err = store.Stat(ctx, "k")
	require.ErrorIs(t, err, objstore.ErrNotFound)
}

// The stack's S3 server is a real one: it checks signatures, and a
// bucket is there once created (not on first use) and gone with its
// objects once deleted. Its ten ports are the stack's listeners, named.
func TestObjectStoreIsS3(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{Dir: stateDir(t), SkipPostgres: true, SkipTemporal: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Stop() })

	var seaweed []string
	for _, l := range s.Listeners() {
		if strings.Contains(l.What, "SeaweedFS") {
			seaweed = append(seaweed, l.Addr)
		}
	}
	require.Len(t, seaweed, 9, "%v", s.Listeners())
	require.Len(t, s.Listeners(), 10, "nothing unnamed: %v", s.Listeners())

	resp, err := http.Get(s.ObjectStore.Endpoint + "/" + ObjectStoreBucket)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "an unsigned request")
	wrong := s.ObjectStore
	wrong.SecretAccessKey = "not-the-secret"
	store, err := objstore.New(ctx, wrong)
	require.NoError(t, err)
	require.ErrorContains(t, store.Check(ctx), "403")

	cfg := ObjectStoreConfig(s.ObjectStore.Endpoint, "devstack-test-bucket")
	store, err = objstore.New(ctx, cfg)
	require.NoError(t, err)
	put := func() error { return store.Put(ctx, "k", strings.NewReader("v"), 1, "text/plain", nil) }
	require.ErrorIs(t, put(), objstore.ErrNotFound, "no bucket before it is created (NoSuchBucket)")
	require.NoError(t, CreateBucket(ctx, cfg))
	require.NoError(t, CreateBucket(ctx, cfg), "one that exists is no error")
	require.NoError(t, put())
	require.NoError(t, DeleteBucket(ctx, cfg), "with its objects")
	require.ErrorContains(t, store.Check(ctx), "404")
	require.NoError(t, DeleteBucket(ctx, cfg), "one that is gone is no error")

	sockets := s.objectSockets
	require.Len(t, sockets, 7)
	for _, path := range sockets {
		require.FileExists(t, path)
	}
	require.NoError(t, s.Stop())
	for _, path := range sockets {
		require.NoFileExists(t, path, "removed at stop")
	}
}

// Ports whose Unix sockets a running server holds (in another network
// namespace, say) are not free; sockets a server left are removed.
func TestSeaweedSockets(t *testing.T) {
	kept, err := freeSmallPorts(5)
	require.NoError(t, err)
	ports, err := SeaweedPorts{S3: kept[0], Master: kept[1], Volume: kept[2], Filer: kept[3], Admin: kept[4]}.withDefaults()
	require.NoError(t, err)
	require.Contains(t, ports.Sockets(), fmt.Sprintf("/tmp/seaweedfs-master-grpc-%d.sock", kept[1]+10000))
	require.True(t, ports.socketsFree())

	live := ports.Sockets()[2]
	ln, err := net.Listen("unix", live)
	require.NoError(t, err)
	require.False(t, ports.socketsFree())
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, ln.Close())
	require.FileExists(t, live, "left behind")
	require.True(t, ports.socketsFree())
	require.NoFileExists(t, live)
}

func TestSeaweedArgs(t *testing.T) {
	ports := SeaweedPorts{S3: 8333, Master: 9333, Volume: 8080, Filer: 8888, Admin: 12535}
	for _, tt := range []struct {
		name    string
		ports   SeaweedPorts
		want    []string
		wantErr string
	}{
		{name: "gRPC ports derived", ports: ports, want: []string{
			"-ip=10.0.0.2", "-ip.bind=10.0.0.2", "-s3.port=8333", "-s3.port.grpc=18333",
			"-master.port=9333", "-master.port.grpc=19333", "-volume.port=8080", "-volume.port.grpc=18080",
			"-filer.port=8888", "-filer.port.grpc=18888", "-admin.port=12535", "-admin.port.grpc=22535",
		}},
		{name: "gRPC ports given", ports: SeaweedPorts{S3: 1, S3GRPC: 2, Master: 3, MasterGRPC: 4, Volume: 5,
			VolumeGRPC: 6, Filer: 7, FilerGRPC: 8, Admin: 9, AdminGRPC: 10}, want: []string{
			"-s3.port=1", "-s3.port.grpc=2", "-master.port.grpc=4", "-admin.port.grpc=10",
		}},
		{name: "one port twice", ports: SeaweedPorts{S3: 8333, Master: 8333, Volume: 8080, Filer: 8888, Admin: 12535},
			wantErr: "want ten distinct ports"},
		{name: "a derived port out of range", ports: SeaweedPorts{S3: 60000, Master: 9333, Volume: 8080, Filer: 8888, Admin: 12535},
			wantErr: "want ten distinct ports"},
		{name: "a port missing", ports: SeaweedPorts{S3: 8333}, wantErr: "want ten distinct ports"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "seaweedfs")
			args, err := SeaweedArgs(dir, "10.0.0.2", tt.ports)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, []string{"-logtostderr", "mini", "-dir=" + dir}, args[:3])
			require.Subset(t, args, append(tt.want, "-s3.config="+filepath.Join(dir, "s3.json"),
				"-s3.autoCreateBucket=false", "-master.telemetry=false", "-admin.ui=false", "-webdav=false"))
			b, err := os.ReadFile(filepath.Join(dir, "s3.json"))
			require.NoError(t, err)
			var config seaweedIdentities
			require.NoError(t, json.Unmarshal(b, &config))
			cfg := ObjectStoreConfig("", "")
			require.Equal(t, []seaweedCredential{{AccessKey: cfg.AccessKeyID, SecretKey: cfg.SecretAccessKey}},
				config.Identities[0].Credentials)
		})
	}
}
