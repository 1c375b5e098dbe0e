// Package fauxqs starts the fauxqs SQS-compatible server (npm, pinned by .ci/fauxqs.sh) for
// tests: on 127.0.0.1 only, on a free port, stopped by its PID when the test ends.
//
// Rules:
//
//  1. Start installs fauxqs with .ci/fauxqs.sh when the install folder (.tools/fauxqs, or
//     $SLUICE_FAUXQS_DIR) lacks it, then runs a few lines of JavaScript that call fauxqs's
//     exported buildApp and listen on 127.0.0.1 port 0, and waits until GET /health answers
//     {"status":"ok"}.
//  2. A test that needs the server fails when it cannot start, unless SLUICE_NO_FAUXQS=1 is
//     set, in which case it is skipped with a message saying so.
//  3. The server is killed by PID in t.Cleanup. It also exits by itself when its standard
//     input closes, which happens when the test binary exits however it dies.
package fauxqs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// EnvDisable names the variable that, set to 1, makes Start skip instead of fail.
const EnvDisable = "SLUICE_NO_FAUXQS"

// Region is the region the server and the clients agree on.
const Region = "us-east-1"

const startTimeout = 30 * time.Second

// script starts fauxqs on loopback and exits when stdin closes (the test binary is gone).
const script = `
import { pathToFileURL } from "node:url";
const { buildApp } = await import(pathToFileURL(process.env.FAUXQS_APP).href);
const app = buildApp({ logger: false, host: "127.0.0.1", defaultRegion: "us-east-1" });
await app.listen({ port: 0, host: "127.0.0.1" });
process.stdout.write("port " + app.server.address().port + "\n");
const bye = () => process.exit(0);
process.stdin.on("end", bye);
process.stdin.on("close", bye);
process.stdin.on("error", bye);
process.stdin.resume();
`

// Server is a running fauxqs.
type Server struct {
	URL string // http://127.0.0.1:PORT
	PID int

	cmd    *exec.Cmd
	stdin  io.Closer
	stderr *syncBuffer
	once   sync.Once
}

// Start starts a fauxqs server for t (see the package rules).
func Start(t testing.TB) *Server {
	t.Helper()
	if os.Getenv(EnvDisable) == "1" {
		t.Skipf("fauxqs: skipped because %s=1 (this test needs the fauxqs SQS server)", EnvDisable)
	}
	s, err := New()
	if err != nil {
		t.Fatalf("fauxqs: cannot start the SQS test server (set %s=1 to skip tests that need it): %v", EnvDisable, err)
	}
	t.Cleanup(s.Stop)
	return s
}

// New starts a server not tied to one test (for a server shared by a package's tests); the
// caller stops it, e.g. in TestMain after m.Run. It does not look at EnvDisable.
func New() (*Server, error) { return start() }

// LoadOptions configure an SDK client for the server: its region and static test credentials.
func (s *Server) LoadOptions() []func(*config.LoadOptions) error {
	return []func(*config.LoadOptions) error{
		config.WithRegion(Region),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
	}
}

// Stop kills the server by its PID and reaps it. It is idempotent.
func (s *Server) Stop() {
	s.once.Do(func() {
		s.stdin.Close()
		if s.cmd.Process != nil {
			s.cmd.Process.Kill()
			s.cmd.Wait()
		}
	})
}

// Stderr is what the server wrote to its standard error so far.
func (s *Server) Stderr() string { return s.stderr.String() }

func start() (*Server, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node not found (fauxqs needs Node >= 20): %w", err)
	}
	app, err := appPath()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(node, "--input-type=module", "-e", script)
	cmd.Env = append(os.Environ(), "FAUXQS_APP="+app)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start node: %w", err)
	}
	s := &Server{PID: cmd.Process.Pid, cmd: cmd, stdin: stdin, stderr: stderr}
	fail := func(err error) (*Server, error) {
		s.Stop()
		return nil, fmt.Errorf("%w; server stderr: %s", err, strings.TrimSpace(stderr.String()))
	}

	portc := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		portc <- strings.TrimSpace(line)
		io.Copy(io.Discard, stdout)
	}()
	var line string
	select {
	case line = <-portc:
	case <-time.After(startTimeout):
		return fail(fmt.Errorf("no port announced within %v", startTimeout))
	}
	port, err := strconv.Atoi(strings.TrimPrefix(line, "port "))
	if err != nil || !strings.HasPrefix(line, "port ") {
		return fail(fmt.Errorf("unexpected first line %q", line))
	}
	s.URL = "http://127.0.0.1:" + strconv.Itoa(port)
	if err := waitHealthy(s.URL); err != nil {
		return fail(err)
	}
	return s, nil
}

func waitHealthy(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			var body struct{ Status string }
			err = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if err == nil && body.Status == "ok" {
				return nil
			}
			if err == nil {
				err = fmt.Errorf("health status %q", body.Status)
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s/health not ok within %v: %w", url, startTimeout, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

var installMu sync.Mutex

// appPath finds fauxqs's dist/app.js, installing it first when it is missing.
func appPath() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir := os.Getenv("SLUICE_FAUXQS_DIR")
	if dir == "" {
		dir = filepath.Join(root, ".tools", "fauxqs")
	}
	app := filepath.Join(dir, "node_modules", "fauxqs", "dist", "app.js")
	installMu.Lock()
	defer installMu.Unlock()
	if _, err := os.Stat(app); err == nil {
		return app, nil
	}
	cmd := exec.Command("bash", filepath.Join(root, ".ci", "fauxqs.sh"), "install")
	cmd.Env = append(os.Environ(), "SLUICE_FAUXQS_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("install fauxqs with .ci/fauxqs.sh: %w: %s", err, bytes.TrimSpace(out))
	}
	if _, err := os.Stat(app); err != nil {
		return "", fmt.Errorf("fauxqs installed but %s is missing: %w", app, err)
	}
	return app, nil
}

// moduleRoot walks up from the working directory (a test runs in its package's folder) to
// the directory holding .ci/fauxqs.sh and go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, ".ci", "fauxqs.sh")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				return d, nil
			}
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no module root with .ci/fauxqs.sh above %s", dir)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.b.Len() > 1<<16 {
		return len(p), nil // enough to diagnose; do not grow without bound
	}
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
