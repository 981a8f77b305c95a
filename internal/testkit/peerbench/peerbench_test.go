package peerbench

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testkit/benchfleet"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// A tiny closed loop against the simulator: every answer is checked, a target that
// answers something else is an error, and nothing leaves loopback.
func TestAskTheSimulator(t *testing.T) {
	hs, simURL, err := simulator.New(simulator.Options{}).Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	ctx := context.Background()
	hc := Client(4)
	sim := Target{Name: "simulator", BaseURL: simURL, Model: "sim-scripted"}
	var n int64
	res := benchfleet.ClosedLoop(ctx, func() (time.Duration, error) { n++; return Ask(ctx, hc, sim, n) }, 1, 10*time.Second, 20)
	if res.Errors != 0 || len(res.Latencies) != 20 || res.Rate() <= 0 {
		t.Fatalf("%d answers, %d errors (%v), rate %.1f; want 20, none, positive", len(res.Latencies), res.Errors, res.FirstErr, res.Rate())
	}
	if _, err := Ask(ctx, hc, Target{Name: "wrong path", BaseURL: simURL + "/nowhere", Model: "sim-scripted"}, 1); err == nil {
		t.Error("a 404 counted as an answer")
	}
	if _, err := Ask(ctx, hc, Target{Name: "elsewhere", BaseURL: "http://192.0.2.1:80"}, 1); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("a non-loopback target: %v, want refused before sending", err)
	}
	if !Loopback("http://127.0.0.1:9") || !Loopback("http://[::1]:9") || Loopback("http://localhost.example:9") || Loopback("http://10.0.0.1") {
		t.Error("Loopback misjudges an address")
	}
}

func TestProcCPU(t *testing.T) {
	before, err := ProcCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Burn CPU until the kernel's tick-based counter moves (bounded).
	deadline := time.Now().Add(10 * time.Second)
	after := before
	for after <= before && time.Now().Before(deadline) {
		x := 0
		for i := range 20_000_000 {
			x += i
		}
		_ = x
		if after, err = ProcCPU(os.Getpid()); err != nil {
			t.Fatal(err)
		}
	}
	if after <= before {
		t.Fatalf("CPU time did not grow: %s then %s", before, after)
	}
	// Children are found (their CPU is added to the parent's).
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if !slices.Contains(children(os.Getpid()), cmd.Process.Pid) {
		t.Errorf("children(%d) = %v, want it to hold %d", os.Getpid(), children(os.Getpid()), cmd.Process.Pid)
	}
	if _, err := ProcCPU(1 << 30); err == nil {
		t.Error("no error for a process that does not exist")
	}
	f, err := statFields([]byte("42 (a b) c) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16"))
	if err != nil || f[0] != "S" || f[14-3] != "11" || f[15-3] != "12" {
		t.Errorf("statFields = %v, %v; want state S, utime 11, stime 12", f, err)
	}
}

func TestRedisCPU(t *testing.T) {
	got, err := ParseRedisCPU("# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:2.250000\r\nused_cpu_sys_children:9.0\r\n")
	if err != nil || got != 3750*time.Millisecond {
		t.Errorf("ParseRedisCPU = %s, %v; want 3.75s (children left out)", got, err)
	}
	if _, err := ParseRedisCPU("used_cpu_sys:1.5\r\n"); err == nil {
		t.Error("no error without used_cpu_user")
	}
	rdb, _ := testenv.Redis(t)
	ctx := context.Background()
	if d, err := RedisCPU(ctx, rdb); err != nil || d <= 0 {
		t.Errorf("RedisCPU = %s, %v; want a positive time", d, err)
	}
	if RedisPID(ctx, rdb) <= 0 {
		t.Error("INFO server gave no process_id")
	}
}
