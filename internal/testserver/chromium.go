package testserver

import (
	"os"
	"os/exec"
	"testing"
)

// InstallChromium is what installs the browser the browser tests drive;
// the test task runs it as root.
const InstallChromium = "go tool task chromium (as root), or: sudo apt-get install -y --no-install-recommends chromium"

// Chromium is the path of the browser a browser test drives (what names
// the test, as "the Web UI test"). Without one the test skips, saying how
// to install it, except under CI, whose task installs it first.
func Chromium(t testing.TB, what string) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("chromium is not installed; the CI task `go tool task test` installs it first: %s", InstallChromium)
	}
	t.Skipf("chromium is not installed; install it to run %s: %s", what, InstallChromium)
	return ""
}
