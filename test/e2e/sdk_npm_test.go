package e2e_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/pkg/config"
)

// jsDir holds the npm SDK tests: package.json pins the SDKs, package-lock.json is
// what npm ci installs.
const jsDir = "js"

// minNode is the oldest Node.js major version the pinned SDKs support.
const minNode = 20

// The official npm SDKs work unchanged against the fleet: node --test runs
// test/e2e/js/*.test.mjs with the openai and @anthropic-ai/sdk packages against the
// fleet's binaries — chat.completions, responses and messages, each non-streamed and
// through the SDK's stream helper (which must rebuild the same answer, citations
// included), client tools, the native search declarations and typed errors; and the
// MCP server (/mcp) with @modelcontextprotocol/sdk's client and the MCP inspector's CLI.
// A tenant key is configured, so Bearer (openai, MCP) and x-api-key (anthropic) auth are
// exercised.
//
// Node.js ≥ 20 and npm are required: without them the test fails, it does not skip
// (go test -short skips the whole e2e suite).
func TestNPMSDKs(t *testing.T) {
	t.Parallel()
	node := nodeJS(t)
	npmCI(t)
	files, _ := filepath.Glob(filepath.Join(jsDir, "*.test.mjs"))
	if len(files) == 0 {
		t.Fatalf("no %s/*.test.mjs files", jsDir)
	}
	for i, f := range files {
		files[i] = filepath.Base(f)
	}

	const keyEnv, key = "SDK_JS_TENANT_KEY", "sk-sdk-js-e2e"
	c := newCluster(t, func(f *config.File) {
		f.Tenants = append(f.Tenants, config.Tenant{ID: "sdk-js", APIKeyEnv: keyEnv})
	})
	c.env = append(c.env, keyEnv+"="+key, "FLEET_FETCH_ALLOW=127.0.0.0/8", // mcp.test.mjs fetches a page it serves on loopback
		"FLEET_RESEARCH_AGENT_POLL=500ms") // research.test.mjs follows a run at a provider agent
	c.startIngress()
	c.start("chatworker", "chatworker")
	c.start("searchworker", "searchworker")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"--test", "--test-reporter=spec"}, files...)...)
	cmd.Dir = jsDir
	cmd.Env = append(sdkFreeEnv(), "FLEET_BASE_URL="+c.url, "FLEET_API_KEY="+key, "FLEET_MODEL="+demo.Model, "NO_COLOR=1", "FORCE_COLOR=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	summary := regexp.MustCompile(`(?m)^ℹ (tests|pass|fail|duration_ms) .*$`).FindAllString(out.String(), -1)
	if err != nil {
		t.Fatalf("node --test %s: %v\n%s", strings.Join(files, " "), err, out.String())
	}
	if !slices.Contains(summary, "ℹ fail 0") || slices.Contains(summary, "ℹ pass 0") || len(summary) < 3 {
		t.Fatalf("node --test reported no passing run:\n%s", out.String())
	}
	t.Logf("node --test: %s", strings.Join(summary, ", "))
}

// sdkFreeEnv is this process's environment without the variables the SDKs read for
// themselves (OPENAI_*, ANTHROPIC_*: keys, base URLs, an auth token the Anthropic SDK
// would send besides x-api-key), so a developer's settings cannot redirect the tests.
func sdkFreeEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPENAI_") && !strings.HasPrefix(kv, "ANTHROPIC_") {
			out = append(out, kv)
		}
	}
	return out
}

// nodeJS returns the node executable, failing the test when Node.js or npm is missing
// or too old.
func nodeJS(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("Node.js is not installed: the npm SDK tests (test/e2e/js) need node ≥ %d and npm on PATH (go test -short skips the e2e suite)", minNode)
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Fatalf("npm is not installed: the npm SDK tests (test/e2e/js) need it to install the pinned SDKs (npm ci)")
	}
	v, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Fatalf("node --version: %v", err)
	}
	major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(strings.TrimSpace(string(v)), "v"), ".", 2)[0])
	if major < minNode {
		t.Fatalf("Node.js %s is too old: the pinned SDKs need node ≥ %d", strings.TrimSpace(string(v)), minNode)
	}
	return node
}

var npmOnce struct {
	sync.Once
	err error
}

// npmCI installs the pinned SDKs with npm ci, once per test run, and not at all when
// node_modules was installed from the same package-lock.json (a stamp records the
// lock's hash after a successful install).
func npmCI(t *testing.T) {
	t.Helper()
	npmOnce.Do(func() { npmOnce.err = installSDKs() })
	if npmOnce.err != nil {
		t.Fatal(npmOnce.err)
	}
}

func installSDKs() error {
	lock, err := os.ReadFile(filepath.Join(jsDir, "package-lock.json"))
	if err != nil {
		return fmt.Errorf("reading the lock file: %w", err)
	}
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:])
	stamp := filepath.Join(jsDir, "node_modules", ".searchfleet-lock-sha256")
	if got, err := os.ReadFile(stamp); err == nil && strings.TrimSpace(string(got)) == want {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = jsDir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm ci in test/e2e/js (the npm registry must be reachable): %v\n%s", err, out.String())
	}
	return os.WriteFile(stamp, []byte(want+"\n"), 0o644)
}
