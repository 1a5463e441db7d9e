package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// seaweedPkg is SeaweedFS's program, pinned in tools/seaweedfs/go.mod.
const seaweedPkg = "github.com/seaweedfs/seaweedfs/weed"

// Seaweed returns the path of SeaweedFS's program for the repository at
// root, <root>/.bin/weed, built like [TemporalCLI] from the version
// tools/seaweedfs/go.mod pins (a module of its own, so that its newer
// gRPC never moves the Temporal server's). Before it builds, which takes
// minutes with an empty build cache, it writes one line saying so to
// progress (nil: nowhere).
func Seaweed(ctx context.Context, progress io.Writer, root string) (string, error) {
	return build(ctx, progress, root, filepath.Join("tools", "seaweedfs"), "weed", seaweedPkg)
}

// SeaweedPorts are the TCP ports of one SeaweedFS server (`weed mini`):
// its S3 API's, the one clients use, and those of the master, the volume
// server, the filer and the admin server (which runs its maintenance
// worker: vacuum) inside it, each an HTTP port and a gRPC port, which
// only the server itself uses. A zero gRPC port is SeaweedFS's default,
// its HTTP port + 10000 (which must then be below 55536).
//
// The admin server listens on the loopback address whatever the
// server's address. SeaweedFS also serves every gRPC port on a Unix
// socket, /tmp/seaweedfs-<service>-grpc-<port>.sock, and the filer and
// the S3 API on /tmp/seaweedfs-filer-<port>.sock and
// /tmp/seaweedfs-s3-<port>.sock: paths a network namespace does not
// separate. Two servers on one machine need ports of their own even in
// different network namespaces (or a /tmp of their own), else one takes
// the other's sockets ([SeaweedPorts.Sockets]).
type SeaweedPorts struct {
	S3, S3GRPC         int
	Master, MasterGRPC int
	Volume, VolumeGRPC int
	Filer, FilerGRPC   int
	Admin, AdminGRPC   int
}

// withDefaults fills the gRPC ports SeaweedFS would derive and checks
// that the ten are ports and distinct.
func (p SeaweedPorts) withDefaults() (SeaweedPorts, error) {
	for _, pair := range []struct{ http, grpc *int }{
		{&p.S3, &p.S3GRPC}, {&p.Master, &p.MasterGRPC}, {&p.Volume, &p.VolumeGRPC},
		{&p.Filer, &p.FilerGRPC}, {&p.Admin, &p.AdminGRPC},
	} {
		if *pair.grpc == 0 {
			*pair.grpc = *pair.http + 10000
		}
	}
	seen := map[int]bool{}
	for _, port := range []int{p.S3, p.S3GRPC, p.Master, p.MasterGRPC, p.Volume, p.VolumeGRPC,
		p.Filer, p.FilerGRPC, p.Admin, p.AdminGRPC} {
		if port <= 0 || port > 65535 || seen[port] {
			return p, fmt.Errorf("seaweedfs ports %+v: want ten distinct ports from 1 to 65535", p)
		}
		seen[port] = true
	}
	return p, nil
}

// Sockets are the Unix sockets a SeaweedFS server on p makes in /tmp
// beside its TCP ports (p with its gRPC ports filled in). It leaves them
// behind when it exits: remove them then.
func (p SeaweedPorts) Sockets() []string {
	p, _ = p.withDefaults()
	var out []string
	for _, s := range []struct {
		name string
		port int
	}{
		{"master-grpc", p.MasterGRPC}, {"volume-grpc", p.VolumeGRPC}, {"filer-grpc", p.FilerGRPC},
		{"s3-grpc", p.S3GRPC}, {"admin-grpc", p.AdminGRPC}, {"filer", p.Filer}, {"s3", p.S3},
	} {
		out = append(out, fmt.Sprintf("/tmp/seaweedfs-%s-%d.sock", s.name, s.port))
	}
	return out
}

// socketsFree reports whether no running server holds a socket of
// Sockets, such as one in another network namespace on the same ports
// (which the TCP ports being free here does not rule out). It removes
// those a server left behind.
func (p SeaweedPorts) socketsFree() bool {
	for _, path := range p.Sockets() {
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			c.Close()
			return false
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			_ = os.Remove(path)
		}
	}
	return true
}

// listeners names the ports on ip (the admin server's on loopback), as
// Stack.Listeners reports them, the S3 API's first.
func (p SeaweedPorts) listeners(ip string) []Listener {
	addr := func(ip string, port int) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }
	const admin = "127.0.0.1"
	return []Listener{
		{Addr: addr(ip, p.S3), What: "the object store"},
		{Addr: addr(ip, p.S3GRPC), What: "the SeaweedFS S3 gateway's gRPC API"},
		{Addr: addr(ip, p.Master), What: "the SeaweedFS master's HTTP API"},
		{Addr: addr(ip, p.MasterGRPC), What: "the SeaweedFS master's gRPC API"},
		{Addr: addr(ip, p.Volume), What: "the SeaweedFS volume server's HTTP API"},
		{Addr: addr(ip, p.VolumeGRPC), What: "the SeaweedFS volume server's gRPC API"},
		{Addr: addr(ip, p.Filer), What: "the SeaweedFS filer's HTTP API"},
		{Addr: addr(ip, p.FilerGRPC), What: "the SeaweedFS filer's gRPC API"},
		{Addr: addr(admin, p.Admin), What: "the SeaweedFS admin server's HTTP API"},
		{Addr: addr(admin, p.AdminGRPC), What: "the SeaweedFS admin server's gRPC API"},
	}
}

// seaweedIdentities is SeaweedFS's S3 configuration (-s3.config): one
// identity, the stack's credential, allowed everything. With an identity
// configured SeaweedFS checks every request's signature (SigV4), and an
// unsigned one is refused.
type seaweedIdentities struct {
	Identities []seaweedIdentity `json:"identities"`
}

type seaweedIdentity struct {
	Name        string              `json:"name"`
	Credentials []seaweedCredential `json:"credentials"`
	Actions     []string            `json:"actions"`
}

type seaweedCredential struct {
	AccessKey string `json:"accessKey"`
	SecretKey string `json:"secretKey"`
}

// SeaweedArgs returns the arguments (after the program, [Seaweed]'s) of
// one SeaweedFS server keeping its state in dir and serving the S3 API
// on ip:ports.S3, and writes the S3 configuration they name,
// dir/s3.json, which holds the credential of [ObjectStoreConfig]. dir is
// created; the server's state in it (the master's under m<master port>)
// is kept across restarts on the same ports.
//
// The server is `weed -logtostderr mini`: a master, a volume server, a
// filer, the S3 API and an admin server with its maintenance worker in
// one process, bound to ip (the address they give each other too; the
// admin server to loopback), logging to standard error. mini, rather
// than `weed server`, because it starts them in order and so stops them
// in the reverse order: `weed server` stops the volume server before the
// filer, whose last flush then retries for 15 s. The S3 API takes
// path-style requests signed with that credential (SigV4) and nothing
// unsigned; a bucket is created before it is used (CreateBucket, or
// [CreateBucket]), as on S3, and DeleteBucket removes one with its
// objects. Volumes are 64 MiB files created as objects need them (an
// object spans several). Telemetry, metrics, WebDAV, the admin UI and the
// optional listeners (Iceberg, Lance, the admin server's legacy port) are
// off: the server opens the ten ports of ports and nothing else, and calls
// nothing outside. It stops within a few seconds of SIGTERM.
//
// Its S3 API serves about 4 s after the start: [CreateBucket] on the
// stack's configuration fails until then, and is the readiness check
// devstack uses. Restarted on existing volumes, its master assigns none
// for 15 s (three of the volume server's heartbeats, so that every
// volume server reports first): writes in that time wait for it, and a
// stop in that time takes until its end (the filer's last flush is a
// write).
func SeaweedArgs(dir, ip string, ports SeaweedPorts) ([]string, error) {
	ports, err := ports.withDefaults()
	if err != nil {
		return nil, err
	}
	configFile, err := writeSeaweedIdentities(dir)
	if err != nil {
		return nil, err
	}
	itoa := strconv.Itoa
	return []string{
		// Else glog writes its files into the temporary folder besides.
		"-logtostderr",
		"mini",
		"-dir=" + dir,
		"-ip=" + ip, "-ip.bind=" + ip,
		"-master.port=" + itoa(ports.Master), "-master.port.grpc=" + itoa(ports.MasterGRPC),
		"-volume.port=" + itoa(ports.Volume), "-volume.port.grpc=" + itoa(ports.VolumeGRPC),
		"-filer.port=" + itoa(ports.Filer), "-filer.port.grpc=" + itoa(ports.FilerGRPC),
		"-s3.port=" + itoa(ports.S3), "-s3.port.grpc=" + itoa(ports.S3GRPC),
		"-admin.port=" + itoa(ports.Admin), "-admin.port.grpc=" + itoa(ports.AdminGRPC),
		"-s3.config=" + configFile,
		// As on S3: a bucket is created before it is used, and a
		// bucket deleted goes with its objects (a test's, at its end).
		"-s3.autoCreateBucket=false", "-s3.allowDeleteBucketNotEmpty=true",
		// Nothing listens but the ten ports, nothing calls out.
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.iam=false",
		"-admin.port.legacy=0", "-admin.ui=false", "-webdav=false",
		"-master.telemetry=false",
		// Small volumes, as many as the disk allows, grown on demand.
		"-master.volumeSizeLimitMB=64", "-volume.max=0",
		// The volume server waits this long after its last heartbeat
		// before it stops: for a cluster, not for a single process.
		"-volume.preStopSeconds=0",
	}, nil
}

// writeSeaweedIdentities writes dir/s3.json, creating dir, and returns
// its path.
func writeSeaweedIdentities(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("seaweedfs folder: %w", err)
	}
	config, err := json.MarshalIndent(seaweedIdentities{Identities: []seaweedIdentity{{
		Name:        objectStoreAccessKey,
		Credentials: []seaweedCredential{{AccessKey: objectStoreAccessKey, SecretKey: objectStoreSecretKey}},
		Actions:     []string{"Admin", "Read", "List", "Tagging", "Write"},
	}}}, "", "  ")
	if err != nil {
		return "", fmt.Errorf("seaweedfs s3 config: %w", err)
	}
	file := filepath.Join(dir, "s3.json")
	if err := os.WriteFile(file, config, 0o600); err != nil {
		return "", fmt.Errorf("seaweedfs s3 config: %w", err)
	}
	return file, nil
}
