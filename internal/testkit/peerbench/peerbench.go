// Package peerbench holds the pieces of the peer benchmark (cmd/peerbench): the same
// chat request sent to the simulator alone, through the fleet and through another
// gateway, and what each costs in CPU, read from /proc and from Redis's INFO.
package peerbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Target is where a request goes: a base URL (loopback only) with the headers and the
// model name that this target needs for the same upstream call.
type Target struct {
	Name    string
	BaseURL string
	Model   string
	Header  http.Header
}

// Answer is the text every answer must contain: the simulator's own words for a
// question it answers without searching.
const Answer = "(simulated model) I can answer that without searching"

// Loopback reports whether base names a loopback host (the benchmark sends nothing
// elsewhere).
func Loopback(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}

// Client is an HTTP client for a closed loop of up to conns clients: kept-alive
// connections, no compression (no target gets to skip bytes another sends).
func Client(conns int) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: conns * 2, MaxIdleConnsPerHost: conns * 2, IdleConnTimeout: 90 * time.Second,
		DisableCompression: true, ForceAttemptHTTP2: false,
	}}
}

// Ask sends one no-search chat completion to t and returns how long the answer took.
// A status other than 200, or an answer without the simulator's text, is an error.
func Ask(ctx context.Context, hc *http.Client, t Target, n int64) (time.Duration, error) {
	if !Loopback(t.BaseURL) {
		return 0, fmt.Errorf("%s: %s is not a loopback address", t.Name, t.BaseURL)
	}
	body, _ := json.Marshal(map[string]any{"model": t.Model,
		"messages": []any{map[string]any{"role": "user", "content": fmt.Sprintf("Tell me a story about item %d sim:nosearch", n)}}})
	req, err := http.NewRequestWithContext(ctx, "POST", t.BaseURL+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	for k, v := range t.Header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(Answer)) {
		return 0, fmt.Errorf("%s: status %d: %.200s", t.Name, resp.StatusCode, b)
	}
	return d, nil
}

// clockTick is the length of the clock tick /proc/<pid>/stat counts CPU time in.
var clockTick = func() time.Duration {
	if out, err := exec.Command("getconf", "CLK_TCK").Output(); err == nil {
		if hz, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && hz > 0 {
			return time.Second / time.Duration(hz)
		}
	}
	return 10 * time.Millisecond // USER_HZ is 100 on Linux
}()

// ProcCPU is the CPU time (user + system) process pid and its descendants have used,
// from utime and stime in /proc/<pid>/stat.
func ProcCPU(pid int) (time.Duration, error) {
	var total time.Duration
	seen := map[int]bool{}
	var walk func(int) error
	walk = func(pid int) error {
		if seen[pid] {
			return nil
		}
		seen[pid] = true
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return err
		}
		f, err := statFields(b)
		if err != nil {
			return fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		// utime and stime are fields 14 and 15 (1-based); statFields starts at field 3.
		ut, err1 := strconv.ParseInt(f[14-3], 10, 64)
		st, err2 := strconv.ParseInt(f[15-3], 10, 64)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("/proc/%d/stat: bad utime/stime", pid)
		}
		total += time.Duration(ut+st) * clockTick
		for _, c := range children(pid) {
			if err := walk(c); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
		return nil
	}
	err := walk(pid)
	return total, err
}

// statFields splits /proc/<pid>/stat after the command name (which may hold spaces
// and parentheses): field 3 (state) first.
func statFields(b []byte) ([]string, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return nil, fmt.Errorf("%d fields", len(f)+2)
	}
	return f, nil
}

// children lists pid's child processes (every thread's, from /proc/<pid>/task).
func children(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, s := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(s); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// RedisCPU is the CPU time the Redis server has used (used_cpu_user + used_cpu_sys of
// INFO cpu: its main thread and its I/O threads), whoever its clients are.
func RedisCPU(ctx context.Context, rdb redis.UniversalClient) (time.Duration, error) {
	s, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO cpu: %w", err)
	}
	return ParseRedisCPU(s)
}

// ParseRedisCPU reads used_cpu_user and used_cpu_sys (seconds) from INFO cpu.
func ParseRedisCPU(info string) (time.Duration, error) {
	var total float64
	found := 0
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok || (k != "used_cpu_user" && k != "used_cpu_sys") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu: %s: %w", k, err)
		}
		total += f
		found++
	}
	if found != 2 {
		return 0, fmt.Errorf("INFO cpu: used_cpu_user and used_cpu_sys not both found")
	}
	return time.Duration(total * float64(time.Second)), nil
}

// RedisPID is the Redis server's process id (INFO server), for showing where its CPU
// is counted; 0 if it does not say.
func RedisPID(ctx context.Context, rdb redis.UniversalClient) int {
	s, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}
