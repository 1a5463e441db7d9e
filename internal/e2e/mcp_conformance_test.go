package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/devstack/devtest"
	mcpdoor "github.com/agentflow/agentflow/internal/gateway/mcp"
	"github.com/agentflow/agentflow/internal/testserver"
)

// The official MCP conformance suite (@modelcontextprotocol/conformance,
// pinned with its lockfile in testdata/mcp) against the gateway's MCP
// server, at both versions the server speaks: 2025-11-25 (sessions) and
// 2026-07-28 (stateless, with the Tasks extension, whose scenarios the
// suite runs at 2026-07-28). Its server scenarios call fixture tools by
// name (test_simple_text, slow_compute, …): the conformance agents
// (testdata/conformance) are those tools, as agents of a tenant.
//
// Which scenarios, or checks of a scenario, do not apply to the server,
// and why, is the MCP guide's table (mcpGuide, "Conformance"): the test
// reads it, so the guide and the test cannot differ. A scenario passes
// when every check it makes passes (SUCCESS, or INFO and SKIPPED, which
// judge nothing) and one of its own does pass; a failed check (FAILURE),
// one that met only a SHOULD (WARNING), or a scenario that judged nothing
// must be in the table, and what the table lists must not pass, so that
// it is never stale. The guide's summary line is the run's.

// mcpGuide is the MCP server's guide, from this package's folder.
const mcpGuide = "../../docs/guides/mcp-server.md"

// mcpConformanceVersions are the spec versions the suite is run at.
var mcpConformanceVersions = []string{"2025-11-25", mcpV2}

// TestMCPConformance runs every server scenario of the conformance suite
// at each version, through a proxy that adds the bearer token the suite
// does not send. It needs Node.js (with npm): without it the test skips,
// except under CI. AGENTFLOW_MCP_CONFORMANCE=<scenario,…> runs only
// those (the guide's summary is then not compared).
func TestMCPConformance(t *testing.T) {
	dir := nodeClient(t, "mcp", "@modelcontextprotocol/conformance")
	guide := readConformanceGuide(t)
	_, front := newConformanceEnv(t)
	suite := conformanceSuite{t: t, dir: dir, url: front + mcpdoor.MCPPath}
	var only []string
	if v := os.Getenv("AGENTFLOW_MCP_CONFORMANCE"); v != "" {
		only = strings.Split(v, ",")
	}
	var got []conformanceTally
	for _, version := range mcpConformanceVersions {
		scenarios := suite.scenarios(version)
		for key := range guide.rows {
			if key.version == version {
				require.Contains(t, scenarios, key.scenario, "the guide lists %s at %s, which the suite does not run", key.scenario, version)
			}
		}
		tally := conformanceTally{version: version}
		var mu sync.Mutex
		t.Run(version, func(t *testing.T) {
			for _, s := range scenarios {
				if only != nil && !slices.Contains(only, s) {
					continue
				}
				t.Run(s, func(t *testing.T) {
					t.Parallel()
					checks := suite.run(t, version, s)
					applies := guide.judge(t, version, s, checks)
					mu.Lock()
					defer mu.Unlock()
					if applies {
						tally.passed++
					} else {
						tally.notApplicable++
					}
				})
			}
		})
		t.Logf("MCP conformance at %s: %s", version, tally)
		got = append(got, tally)
	}
	if only == nil && !t.Failed() {
		require.Equal(t, guide.summary, conformanceSummary(got), "the guide's summary line (%s) is the run's", mcpGuide)
	}
}

// TestMCPConformanceGuide: the MCP guide's table of the scenarios that do
// not apply reads, each row with its reason, and its summary line counts
// as many scenarios as the table lists whole, per version. It needs no
// servers, so that an edit of the table is checked at once.
func TestMCPConformanceGuide(t *testing.T) {
	g := readConformanceGuide(t)
	whole := map[string]int{}
	for key, row := range g.rows {
		if row.whole {
			whole[key.version]++
		}
	}
	for _, version := range mcpConformanceVersions {
		require.Regexp(t, regexp.QuoteMeta(version)+": [0-9]+ scenarios pass, "+strconv.Itoa(whole[version])+" do not apply", g.summary,
			"the summary counts the scenarios the table lists at %s", version)
	}
}

// newConformanceEnv starts a deployment with the conformance agents and
// the file server their tools fetch from, and returns it and the URL of a
// proxy in front of its HTTP API that adds the bearer token (of a user who
// may also approve) to every request.
func newConformanceEnv(t *testing.T) (*httpEnv, string) {
	t.Helper()
	files := httptest.NewServer(conformanceFiles(t))
	t.Cleanup(files.Close)
	script, err := os.ReadFile(filepath.Join("testdata", "conformance", "script.yaml"))
	require.NoError(t, err)
	catalog, err := os.ReadFile(filepath.Join("testdata", "conformance", "catalog.yaml"))
	require.NoError(t, err)
	e := newHTTPEnvWith(t, func(o *testserver.Options) {
		o.Script = strings.ReplaceAll(string(script), "FILES", files.URL)
		o.Catalogs = []string{strings.ReplaceAll(string(catalog), "FILESHOST", strings.TrimPrefix(files.URL, "http://"))}
		o.DatabaseURL = devtest.Database(t)
	})
	target, err := url.Parse(e.api)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	//lint:ignore SA1019 Rewrite would drop the Host the rebinding scenario sends
	direct := proxy.Director
	//lint:ignore SA1019 as above
	proxy.Director = func(r *http.Request) {
		host := r.Host
		direct(r)
		r.Host = host // as the client sent it: the rebinding scenario's Host
		r.Header.Set("Authorization", "Bearer "+e.all)
	}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	return e, front.URL
}

// conformanceFiles serves the files of testdata/conformance/files, each
// with its media type, named here so that it does not depend on the
// machine's MIME tables; and large.bin, conformanceLarge bytes.
func conformanceFiles(t *testing.T) http.Handler {
	types := map[string]string{".png": "image/png", ".wav": "audio/wav", ".txt": "text/plain", ".json": "application/json"}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := filepath.Base(r.URL.Path)
		if name == "large.bin" {
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(bytes.Repeat([]byte{7}, conformanceLarge))
			return
		}
		data, err := os.ReadFile(filepath.Join("testdata", "conformance", "files", name))
		if err != nil || types[filepath.Ext(name)] == "" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", types[filepath.Ext(name)])
		_, _ = w.Write(data)
	})
}

// conformanceLarge is the size of large.bin: more than a result carries
// inline.
const conformanceLarge = 2 << 20

// conformanceSuite runs the suite's command line.
type conformanceSuite struct {
	t        *testing.T
	dir, url string
}

// node runs the suite with args and returns its output and error.
func (s conformanceSuite) node(ctx context.Context, args ...string) ([]byte, error) {
	var pre []string
	if major, _ := strconv.Atoi(strings.TrimPrefix(strings.SplitN(nodeVersion(s.t), ".", 2)[0], "v")); major < 22 {
		pre = append(pre, "--import", "./node20.mjs")
	}
	cmd := exec.CommandContext(ctx, "node", append(append(pre, "node_modules/@modelcontextprotocol/conformance/dist/index.js"), args...)...)
	cmd.Dir = s.dir
	return cmd.CombinedOutput()
}

// scenarioLine is a scenario as `conformance list` prints it.
var scenarioLine = regexp.MustCompile(`^  - (\S+) \[([^\]]*)\]$`)

// scenarios are the server scenarios the suite runs at version: those
// whose spec versions include it and, at 2026-07-28, the extensions'.
func (s conformanceSuite) scenarios(version string) []string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := s.node(ctx, "list", "--server")
	require.NoError(s.t, err, "%s", out)
	var names []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		m := scenarioLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		tags := strings.Split(m[2], ",")
		if slices.Contains(tags, version) || (version == mcpV2 && slices.Contains(tags, "extension")) {
			names = append(names, m[1])
		}
	}
	require.NotEmpty(s.t, names, "%s", out)
	return names
}

// run runs one scenario at version and returns its checks. A scenario of
// a spec version is run at that version; an extension's, at the version
// the suite gives it (2026-07-28).
func (s conformanceSuite) run(t *testing.T, version, scenario string) []conformanceCheck {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	outDir := t.TempDir()
	args := []string{"server", "--url", s.url, "--scenario", scenario, "--timeout", "180000", "-o", outDir}
	if version != mcpV2 || !s.extension(scenario) {
		args = append(args, "--spec-version", version)
	}
	out, err := s.node(ctx, args...)
	// The suite exits non-zero for any failed check, those that do not
	// apply too: the checks say which.
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		require.NoError(t, err, "%s", out)
	}
	checks := conformanceChecks(t, outDir)
	require.NotEmpty(t, checks, "%s", out)
	return checks
}

// extension reports whether a scenario is an extension's (tasks-*,
// sep-2640-skills-*), off the spec versions' timeline.
func (s conformanceSuite) extension(scenario string) bool {
	return strings.HasPrefix(scenario, "tasks-") || strings.HasPrefix(scenario, "sep-2640-")
}

// conformanceCheck is a check the conformance suite ran.
type conformanceCheck struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Status       string `json:"status"`
	Description  string `json:"description"`
	ErrorMessage string `json:"errorMessage"`
}

// passes reports whether a check passed, or judged nothing.
func (c conformanceCheck) passes() bool {
	return c.Status != "FAILURE" && c.Status != "WARNING"
}

// conformanceChecks reads the checks the suite saved under dir.
func conformanceChecks(t *testing.T, dir string) []conformanceCheck {
	t.Helper()
	var checks []conformanceCheck
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Base(path) != "checks.json" {
			return err
		}
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		var cs []conformanceCheck
		require.NoError(t, json.Unmarshal(data, &cs), "%s", data)
		checks = append(checks, cs...)
		return nil
	})
	return checks
}

// nodeVersion is `node --version`.
func nodeVersion(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("node", "--version").Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// conformanceTally is what a version's run came to.
type conformanceTally struct {
	version               string
	passed, notApplicable int
}

func (c conformanceTally) String() string {
	return fmt.Sprintf("%d scenarios pass, %d do not apply", c.passed, c.notApplicable)
}

// conformanceSummary is the guide's summary line of tallies.
func conformanceSummary(tallies []conformanceTally) string {
	parts := make([]string, len(tallies))
	for i, c := range tallies {
		parts[i] = c.version + ": " + c.String()
	}
	return strings.Join(parts, "; ")
}

// conformanceGuide is what the MCP guide says of the suite: the scenarios
// and checks that do not apply, by version, and the summary line.
type conformanceGuide struct {
	rows    map[conformanceKey]conformanceRow
	summary string
}

// conformanceKey names a scenario at a version.
type conformanceKey struct{ version, scenario string }

// conformanceRow is what the guide's table says of a scenario at a
// version: that it does not apply (whole), or which of its checks do not
// (checks), or pass or not with the machine's speed (timed: a check that
// gives the server less time than a durable turn may take).
type conformanceRow struct {
	whole         bool
	checks, timed map[string]bool
}

// guideTimed begins the reason of a check that passes or not with the
// machine's speed.
const guideTimed = "Timed: "

var (
	// guideRow is a row of the guide's table: | what | versions | why |.
	// What is scenarios ("`a`, `b`"), or scenarios' checks ("`a`:
	// `check`, `check`; `b`: `check`").
	guideRow = regexp.MustCompile("^\\| (`.+?) \\| ([0-9, -]+) \\| (.+) \\|$")
	// guideSummary is the guide's summary line.
	guideSummary = regexp.MustCompile(`\*\*(2025-11-25: [^*]+)\*\*`)
	guideName    = regexp.MustCompile("^`([a-z0-9-]+)`$")
)

// readConformanceGuide reads the table of the MCP guide's section
// "Conformance", and its summary line.
func readConformanceGuide(t *testing.T) conformanceGuide {
	t.Helper()
	data, err := os.ReadFile(mcpGuide)
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(data), "\n## Conformance\n")
	require.True(t, ok, "%s has a section ## Conformance", mcpGuide)
	section, _, _ = strings.Cut(section, "\n## ")
	g := conformanceGuide{rows: map[conformanceKey]conformanceRow{}}
	if m := guideSummary.FindStringSubmatch(section); m != nil {
		g.summary = m[1]
	}
	require.NotEmpty(t, g.summary, "the section's summary line, **2025-11-25: … do not apply; 2026-07-28: … do not apply**")
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		m := guideRow.FindStringSubmatch(line)
		require.NotNil(t, m, "a row of the table: | `scenario`, … | versions | why |, or | `scenario`: `check`, …; … | versions | why |: %s", line)
		require.NotContains(t, strings.ToLower(m[3]), "not implemented", "a reason says why a scenario does not apply: %s", line)
		timed := strings.HasPrefix(m[3], guideTimed)
		for _, version := range strings.Split(m[2], ", ") {
			require.Contains(t, mcpConformanceVersions, version, line)
			for _, item := range strings.Split(m[1], "; ") {
				scenarios, checks, ok := strings.Cut(item, ": ")
				for _, scenario := range guideNames(t, scenarios, line) {
					key := conformanceKey{version, scenario}
					row := g.rows[key]
					require.False(t, row.whole, "one row for %s at %s", scenario, version)
					if !ok {
						require.Empty(t, row.checks, "one row for %s at %s", scenario, version)
						row.whole = true
					}
					for _, c := range guideNames(t, checks, line) {
						if row.checks == nil {
							row.checks, row.timed = map[string]bool{}, map[string]bool{}
						}
						row.checks[c], row.timed[c] = true, timed
					}
					g.rows[key] = row
				}
			}
		}
	}
	require.NotEmpty(t, g.rows, "the section's table")
	return g
}

// guideNames are the names of a list of the table ("`a`, `b`"); none for "".
func guideNames(t *testing.T, list, line string) []string {
	t.Helper()
	if list == "" {
		return nil
	}
	var names []string
	for _, item := range strings.Split(list, ", ") {
		m := guideName.FindStringSubmatch(item)
		require.NotNil(t, m, "a name in backquotes, %q, in %s", item, line)
		names = append(names, m[1])
	}
	return names
}

// judge holds a scenario's checks at a version to the guide, and reports
// whether the scenario applies: a scenario the guide lists must fail a
// check, a check it lists must fail, and no other check may.
func (g conformanceGuide) judge(t *testing.T, version, scenario string, checks []conformanceCheck) bool {
	t.Helper()
	row := g.rows[conformanceKey{version, scenario}]
	failed, judged := map[string]bool{}, false
	for _, c := range checks {
		t.Logf("check: %s %s (%s): %s %s", c.Status, c.ID, c.Name, c.Description, c.ErrorMessage)
		if !c.passes() {
			failed[c.ID] = true
		}
		// Every scenario ends with the suite's check of the messages'
		// shapes: a scenario judged something of its own when another
		// check passed.
		judged = judged || (c.Status == "SUCCESS" && c.ID != "wire-schema-valid")
	}
	if row.whole {
		if len(failed) == 0 && judged {
			t.Errorf("%s passes at %s: the guide (%s) says it does not apply; take it out of its table", scenario, version, mcpGuide)
		}
		return false
	}
	if !judged {
		t.Errorf("%s judged nothing at %s (no check of its own passed): it does not apply, and the guide (%s) must say why", scenario, version, mcpGuide)
	}
	for _, c := range checks {
		if !c.passes() && !row.checks[c.ID] {
			t.Errorf("%s %s (%s) at %s, which the guide does not list: %s", c.Status, c.ID, c.Name, version, c.ErrorMessage)
		}
	}
	for id := range row.checks {
		if !failed[id] && !row.timed[id] {
			t.Errorf("check %s of %s passes at %s: the guide (%s) says it does not apply; take it out of its table", id, scenario, version, mcpGuide)
		}
	}
	return true
}
