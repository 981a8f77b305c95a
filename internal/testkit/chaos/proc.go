package chaos

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Proc is one child process that a harness starts, kills and starts again. Every
// start appends to the same log file, <dir>/<name>.log, so a role's whole life is in
// one place.
type Proc struct {
	// Name names the process in the harness's messages; LogFile is its log's path.
	Name, LogFile string

	path string
	args []string
	env  []string
	log  io.Writer

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// NewProc prepares a process running path with args and exactly env (nothing
// inherited: pass PATH and HOME if it needs them).
func NewProc(dir, name, path string, args, env []string) (*Proc, error) {
	logFile := filepath.Join(dir, name+".log")
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &Proc{Name: name, LogFile: logFile, path: path, args: args, env: env, log: f}, nil
}

// Start runs the process. It lives in its own process group (so a kill reaches
// whatever it started) and dies with the harness (Pdeathsig), so an interrupted run
// leaves nothing behind.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("%s is already running", p.Name)
		}
	}
	cmd := exec.Command(p.path, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = p.log, p.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(p.log, "=== chaos: starting %s %v at %s\n", p.path, p.args, time.Now().Format(time.RFC3339Nano))
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(p.log, "=== chaos: %s exited (%v) at %s\n", p.Name, err, time.Now().Format(time.RFC3339Nano))
		close(done)
	}()
	p.cmd, p.done = cmd, done
	return nil
}

// Kill sends SIGKILL to the process group and waits for the process to be gone:
// nothing drained, nothing acknowledged, no file synced.
func (p *Proc) Kill() {
	if !p.signal(syscall.SIGKILL, 10*time.Second) {
		fmt.Fprintf(p.log, "=== chaos: %s did not exit 10s after %s\n", p.Name, syscall.SIGKILL)
	}
}

// Term sends SIGTERM to the process group and waits up to wait before killing.
func (p *Proc) Term(wait time.Duration) {
	if !p.signal(syscall.SIGTERM, wait) {
		p.Kill()
	}
}

// signal sends sig to the process group of the last start and waits up to wait for
// the process to exit; it reports whether it did (true when it never started).
func (p *Proc) signal(sig syscall.Signal, wait time.Duration) bool {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return true
	}
	syscall.Kill(-cmd.Process.Pid, sig)
	select {
	case <-done:
		return true
	case <-time.After(wait):
		return false
	}
}

// Pid is the process id of the last start (0 before any).
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// FreeAddr returns a loopback address with a free port (freePort).
func FreeAddr() (string, error) {
	port, err := freePort()
	return hostPort(port), err
}

// freePort returns a loopback port nobody listens on right now, drawn below the
// kernel's ephemeral range (32768 and up on Linux): a port the kernel hands out for
// "127.0.0.1:0" can be handed out again, to any process on the machine, between this
// check and the moment the server meant for it binds it, and a chaos run once found
// its Redis port held by another test's NATS server. A port outside the range is
// taken only by someone who asks for it by number.
func freePort() (int, error) {
	for range 100 {
		port := freePortLow + rand.IntN(freePortHigh-freePortLow)
		ln, err := net.Listen("tcp", hostPort(port))
		if err != nil {
			continue // in use
		}
		ln.Close()
		return port, nil
	}
	return 0, errors.New("chaos: no free port below the ephemeral range")
}

// The ports freePort draws from.
const (
	freePortLow  = 20000
	freePortHigh = 32768
)

func hostPort(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// waitTCP waits until something accepts connections on port.
func waitTCP(ctx context.Context, port int, within time.Duration) error {
	return Poll(ctx, within, 50*time.Millisecond, func() error {
		c, err := net.DialTimeout("tcp", hostPort(port), 200*time.Millisecond)
		if err != nil {
			return fmt.Errorf("nothing listening on %s after %s: %w", hostPort(port), within, err)
		}
		return c.Close()
	})
}

// Poll calls try every interval until it returns nil, within has passed (its last
// error then) or ctx ends.
func Poll(ctx context.Context, within, interval time.Duration, try func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := try()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// ServeTLS serves h over HTTPS and HTTP/2, as real providers answer, with a throwaway
// certificate written to caFile for the processes to trust (SSL_CERT_FILE).
func ServeTLS(h http.Handler, caFile string) (*httptest.Server, error) {
	ts := httptest.NewUnstartedServer(h)
	ts.EnableHTTP2 = true
	ts.StartTLS()
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o644); err != nil {
		ts.Close()
		return nil, err
	}
	return ts, nil
}
