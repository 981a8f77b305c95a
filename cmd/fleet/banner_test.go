package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// The demo's banner (`make demo`) prints examples that work as printed: every curl in
// it, run against the fleet it describes, answers 2xx — but bob's last, which runs
// until his search budget answers 429 — and alice's signed webhook reaches the demo
// receiver and verifies.
func TestDemoBannerExamplesWorkAsPrinted(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	sim := simulator.New(simulator.Options{})
	hs, simURL, err := sim.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	receiverURL, closeReceiver, err := demo.Receiver(demo.AliceWebhookSecret, log)
	if err != nil {
		t.Fatal(err)
	}
	defer closeReceiver()
	file := demo.Config(simURL, sim.EngineConfigs(simURL))
	demo.AddTenants(file)
	if err := file.Validate(); err != nil {
		t.Fatal(err)
	}
	env := fleettest.Settings()
	env.NATSURL, env.KeyPrefix = bustest.Server(t), prefix
	url, _ := fleettest.Run(t, env, file, rdb)

	var out bytes.Buffer
	banner(&out, strings.TrimPrefix(url, "http://"), "nats", "redis", simURL, receiverURL, file)
	cmds := curls(out.String())
	if len(cmds) != 6 {
		t.Fatalf("%d curl examples in the banner, want 6:\n%s", len(cmds), out.String())
	}
	jobID := ""
	for i, c := range cmds {
		c.url = strings.ReplaceAll(c.url, "<id>", jobID)
		last := i == len(cmds)-1
		for try := 0; ; try++ {
			status, body := c.do(t)
			if last && status == 429 && strings.Contains(body, "budget") {
				break // bob ran out, as the banner says he will
			}
			if status/100 != 2 {
				t.Fatalf("example %d (%s %s): %d %s", i+1, c.method(), c.url, status, body)
			}
			if !last {
				var v struct{ ID string }
				if json.Unmarshal([]byte(body), &v) == nil && strings.HasPrefix(v.ID, "job_") {
					jobID = v.ID
				}
				break
			}
			if try > 2*demo.BobSearchesPerDay+2 {
				t.Fatalf("bob's budget of %d searches never refused", demo.BobSearchesPerDay)
			}
		}
	}
	fleettest.Eventually(t, "alice's webhook verified by the demo receiver", func() bool {
		return strings.Contains(logs.String(), "a delivery verified")
	})
	if strings.Contains(logs.String(), "failed verification") {
		t.Errorf("a demo webhook failed verification:\n%s", logs.String())
	}
}

// curl is one curl command of the banner.
type curl struct {
	url     string
	headers [][2]string
	data    string
	stream  bool
}

func (c curl) method() string {
	if c.data != "" {
		return "POST"
	}
	return "GET"
}

// do runs c; a stream (-N) is read to its end.
func (c curl) do(t *testing.T) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), c.method(), c.url, strings.NewReader(c.data))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range c.headers {
		req.Header.Set(h[0], h[1])
	}
	client := &http.Client{Timeout: 90 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// curls finds the curl commands in text (continued lines joined) and reads their
// URL, -H headers, -d body and -N.
func curls(text string) []curl {
	text = strings.ReplaceAll(text, "\\\n", " ")
	var out []curl
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "curl ") {
			continue
		}
		words := shellWords(line)
		var c curl
		for i := 1; i < len(words); i++ {
			switch w := words[i]; {
			case w == "-H" && i+1 < len(words):
				k, v, _ := strings.Cut(words[i+1], ":")
				c.headers = append(c.headers, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
				i++
			case w == "-d" && i+1 < len(words):
				c.data = words[i+1]
				i++
			case strings.HasPrefix(w, "-"):
				c.stream = c.stream || strings.Contains(w, "N")
			default:
				c.url = w
			}
		}
		out = append(out, c)
	}
	return out
}

// shellWords splits a command line at blanks, honouring single and double quotes.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	var quote rune
	in := false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
