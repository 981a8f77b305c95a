package benchfleet

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// PrefixMonitor counts, from Redis's MONITOR feed, the commands that name a key
// under one prefix, the commands Lua scripts run included: the server-side count of
// one fleet's commands on a Redis that other clients (other tests) use too, which
// INFO commandstats cannot give. MONITOR is per node: a Redis Cluster is not
// supported.
type PrefixMonitor struct {
	conn   net.Conn
	mu     sync.Mutex
	counts CommandStats
	done   chan struct{}
}

// MonitorPrefix starts counting, on the Redis at url (redis:// only), the commands
// naming a key that starts with prefix.
func MonitorPrefix(ctx context.Context, url, prefix string) (*PrefixMonitor, error) {
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	if o.TLSConfig != nil {
		return nil, fmt.Errorf("monitor: TLS is not supported")
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", o.Addr)
	if err != nil {
		return nil, err
	}
	rd := bufio.NewReader(conn)
	send := func(args ...string) error {
		var b strings.Builder
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
		if _, err := conn.Write([]byte(b.String())); err != nil {
			return err
		}
		line, err := rd.ReadString('\n')
		if err != nil {
			return err
		}
		if !strings.HasPrefix(line, "+OK") {
			return fmt.Errorf("monitor: %s: %s", args[0], strings.TrimSpace(line))
		}
		return nil
	}
	if o.Password != "" {
		args := []string{"AUTH", o.Password}
		if o.Username != "" {
			args = []string{"AUTH", o.Username, o.Password}
		}
		if err := send(args...); err != nil {
			conn.Close()
			return nil, err
		}
	}
	if err := send("MONITOR"); err != nil {
		conn.Close()
		return nil, err
	}
	m := &PrefixMonitor{conn: conn, counts: CommandStats{}, done: make(chan struct{})}
	mark := `"` + prefix
	go func() {
		defer close(m.done)
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			if !strings.Contains(line, mark) {
				continue
			}
			if name, ok := monitoredCommand(line); ok {
				m.mu.Lock()
				m.counts[name]++
				m.mu.Unlock()
			}
		}
	}()
	return m, nil
}

// monitoredCommand is the command's name in a MONITOR line,
// `+<time> [<db> <client or "lua">] "<command>" "<arg>" …`, in lower case.
func monitoredCommand(line string) (string, bool) {
	_, rest, ok := strings.Cut(line, `] "`)
	if !ok {
		return "", false
	}
	name, _, ok := strings.Cut(rest, `"`)
	return strings.ToLower(name), ok
}

// Counts returns the counts so far.
func (m *PrefixMonitor) Counts() CommandStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(CommandStats, len(m.counts))
	for k, v := range m.counts {
		out[k] = v
	}
	return out
}

// Close stops counting.
func (m *PrefixMonitor) Close() {
	m.conn.Close()
	<-m.done
}
