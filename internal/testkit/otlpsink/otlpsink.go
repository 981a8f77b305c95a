// Package otlpsink runs a real OTLP receiver for a test — the OpenTelemetry
// Collector's otlpreceiver, built from test/otlpsink by scripts/ensure-otlpsink.sh —
// and reads the spans it received.
package otlpsink

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Sink is a running receiver.
type Sink struct {
	// GRPC and HTTP are its listen addresses (host:port).
	GRPC, HTTP string
	mu         sync.Mutex
	spans      []Span
	raw        bytes.Buffer
}

// Span is one received span, as the OTLP JSON encoding has it.
type Span struct {
	TraceID, SpanID, ParentID string
	Name                      string
	Kind                      int
	// Service is the service.name of the process that sent it.
	Service string
	Attrs   map[string]any
}

// Start builds (once) and starts the receiver until the test ends.
func Start(t testing.TB) *Sink {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	out, err := exec.Command(filepath.Join(root, "scripts", "ensure-otlpsink.sh")).Output()
	if err != nil {
		t.Fatalf("otlpsink: building the receiver: %v", err)
	}
	cmd := exec.Command(strings.TrimSpace(string(out)), "-grpc", "127.0.0.1:0", "-http", "127.0.0.1:0")
	stdin, _ := cmd.StdinPipe() // closing it stops the receiver
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &Sink{}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 2 && f[0] == "grpc" {
				s.GRPC = f[1]
			} else if len(f) == 2 && f[0] == "http" {
				s.HTTP = f[1]
				close(ready)
			} else {
				t.Log("otlpsink:", sc.Text())
			}
		}
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := bufio.NewReaderSize(stdout, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if b, ok := bytes.CutPrefix(line, []byte("spans ")); ok {
				s.add(b)
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		<-done
		cmd.Wait()
	})
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("otlpsink: the receiver did not start")
	}
	return s
}

// Spans is every span received so far.
func (s *Sink) Spans() []Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Span(nil), s.spans...)
}

// Trace is every span received so far of trace id.
func (s *Sink) Trace(id string) []Span {
	var out []Span
	for _, sp := range s.Spans() {
		if sp.TraceID == id {
			out = append(out, sp)
		}
	}
	return out
}

// Raw is everything received as the receiver encoded it, for a check that no text
// appears anywhere in it.
func (s *Sink) Raw() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.raw.String()
}

// otlpJSON is the part of the OTLP JSON encoding of traces read here.
type otlpJSON struct {
	ResourceSpans []struct {
		Resource struct {
			Attributes []kv `json:"attributes"`
		} `json:"resource"`
		ScopeSpans []struct {
			Spans []struct {
				TraceID      string `json:"traceId"`
				SpanID       string `json:"spanId"`
				ParentSpanID string `json:"parentSpanId"`
				Name         string `json:"name"`
				Kind         int    `json:"kind"`
				Attributes   []kv   `json:"attributes"`
			} `json:"spans"`
		} `json:"scopeSpans"`
	} `json:"resourceSpans"`
}

type kv struct {
	Key   string `json:"key"`
	Value struct {
		String *string          `json:"stringValue"`
		Int    *json.RawMessage `json:"intValue"`
		Double *float64         `json:"doubleValue"`
		Bool   *bool            `json:"boolValue"`
		Array  *struct {
			Values []struct {
				String *string `json:"stringValue"`
			} `json:"values"`
		} `json:"arrayValue"`
	} `json:"value"`
}

func (a kv) value() any {
	v := a.Value
	switch {
	case v.String != nil:
		return *v.String
	case v.Int != nil:
		s := strings.Trim(string(*v.Int), `"`) // int64 is a JSON string in OTLP JSON
		n, _ := strconv.ParseInt(s, 10, 64)
		return n
	case v.Double != nil:
		return *v.Double
	case v.Bool != nil:
		return *v.Bool
	case v.Array != nil:
		var out []string
		for _, e := range v.Array.Values {
			if e.String != nil {
				out = append(out, *e.String)
			}
		}
		return out
	}
	return nil
}

func attrs(kvs []kv) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, a := range kvs {
		m[a.Key] = a.value()
	}
	return m
}

func (s *Sink) add(b []byte) {
	var td otlpJSON
	if err := json.Unmarshal(b, &td); err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.raw.Write(b)
	for _, rs := range td.ResourceSpans {
		service, _ := attrs(rs.Resource.Attributes)["service.name"].(string)
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				s.spans = append(s.spans, Span{TraceID: sp.TraceID, SpanID: sp.SpanID, ParentID: sp.ParentSpanID,
					Name: sp.Name, Kind: sp.Kind, Service: service, Attrs: attrs(sp.Attributes)})
			}
		}
	}
}
