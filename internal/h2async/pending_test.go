package h2async

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The goroutine and memory measurements need a client process with no server
// in it (Go's server spends a goroutine on every held request), so the test
// binary re-executes itself as the server when this variable is set.
const childServerEnv = "H2ASYNC_TEST_CHILD_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(childServerEnv) == "1" {
		runChildServer()
		return
	}
	os.Exit(m.Run())
}

// runChildServer serves /hold (blocks until /release), /held (how many are
// blocked) over HTTP/2 with Go's server and its default 250 streams a
// connection; it prints its URL and certificate and exits when stdin closes.
func runChildServer() {
	var mu sync.Mutex
	release := make(chan struct{})
	var held atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/hold", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ch := release
		mu.Unlock()
		held.Add(1)
		select {
		case <-ch:
		case <-r.Context().Done():
		}
		held.Add(-1)
		io.WriteString(w, "released "+r.URL.Query().Get("i"))
	})
	mux.HandleFunc("/held", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, held.Load()) })
	mux.HandleFunc("/release", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		close(release)
		release = make(chan struct{})
		mu.Unlock()
	})
	ts := httptest.NewUnstartedServer(mux)
	ts.EnableHTTP2 = true
	ts.StartTLS()
	fmt.Println(ts.URL)
	fmt.Println(base64.StdEncoding.EncodeToString(ts.Certificate().Raw))
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// childServer starts runChildServer in another process.
type childServer struct {
	url  string
	cert *x509.Certificate
	ctrl *Transport // for /held and /release; dialled before any measurement
}

func startChildServer(tb testing.TB) *childServer {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childServerEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { stdin.Close(); cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	var lines []string
	for len(lines) < 2 && sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) < 2 {
		tb.Fatalf("child server did not start: %v", sc.Err())
	}
	der, err := base64.StdEncoding.DecodeString(lines[1])
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	cs := &childServer{url: lines[0], cert: cert}
	cs.ctrl = newTransport(tb, cert)
	cs.held(tb)
	return cs
}

func (cs *childServer) held(tb testing.TB) int {
	n, err := strconv.Atoi(mustGet(tb, cs.ctrl, cs.url+"/held"))
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

func (cs *childServer) release(tb testing.TB) { mustGet(tb, cs.ctrl, cs.url+"/release") }

// readReleased checks a /hold response.
func readReleased(resp *http.Response, err error, i int) error {
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && string(b) != "released "+strconv.Itoa(i) {
		err = fmt.Errorf("request %d got %q", i, b)
	}
	return err
}

func holdRequest(tb testing.TB, cs *childServer, i int) *http.Request {
	req, err := http.NewRequest(http.MethodGet, cs.url+"/hold?i="+strconv.Itoa(i), nil)
	if err != nil {
		tb.Fatal(err)
	}
	return req
}

// The key property: 2,000 requests waiting on a server cost the client about
// two goroutines per connection, none per request, and all complete.
func TestPendingRequestsHoldNoGoroutines(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server process and 2,000 requests")
	}
	cs := startChildServer(t)
	tr := newTransport(t, cs.cert)
	runtime.GC()
	base := runtime.NumGoroutine()

	const n = 2000
	errs := make(chan error, n)
	for i := range n {
		tr.Start(holdRequest(t, cs, i), func(resp *http.Response, err error) { errs <- readReleased(resp, err, i) })
	}
	waitFor(t, "all requests held by the server", func() bool { return cs.held(t) == n })
	growth := runtime.NumGoroutine() - base
	conns, streams := tr.connStats()
	t.Logf("%d pending requests on %d connections: client goroutines grew by %d", n, conns, growth)
	if streams != n {
		t.Fatalf("%d streams seated, want %d", streams, n)
	}
	// Reader + writer per connection; a little slack for the control
	// transport's transient done goroutines.
	if limit := 2*conns + 5; growth > limit {
		t.Fatalf("goroutines grew by %d with %d pending requests; want at most %d", growth, n, limit)
	}

	cs.release(t)
	for range n {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("released requests did not complete")
		}
	}
	tr.CloseIdleConnections()
	waitFor(t, "goroutines back to the baseline", func() bool { return runtime.NumGoroutine() <= base })
}

// BenchmarkPendingRequest reports the client's heap+stack bytes per pending
// request (N=2000 held by a server in another process), for this transport
// and for net/http's HTTP/2 client with a goroutine blocked in Do per request.
// Each round runs after a warm-up round, so connections are already open.
//
//	go test -run '^$' -bench PendingRequest -benchtime 3x ./internal/h2async/
func BenchmarkPendingRequest(b *testing.B) {
	cs := startChildServer(b)
	b.Run("h2async", func(b *testing.B) {
		tr := newTransport(b, cs.cert)
		benchPending(b, cs, func(req *http.Request, i int, finished func(error)) {
			tr.Start(req, func(resp *http.Response, err error) { finished(readReleased(resp, err, i)) })
		})
	})
	b.Run("net-http", func(b *testing.B) {
		roots := x509.NewCertPool()
		roots.AddCert(cs.cert)
		nt := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}
		defer nt.CloseIdleConnections()
		client := &http.Client{Transport: nt}
		benchPending(b, cs, func(req *http.Request, i int, finished func(error)) {
			go func() {
				resp, err := client.Do(req)
				finished(readReleased(resp, err, i))
			}()
		})
	})
}

func benchPending(b *testing.B, cs *childServer, send func(req *http.Request, i int, finished func(error))) {
	const n = 2000
	round := func() float64 {
		var wg sync.WaitGroup
		var failed atomic.Int32
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		for i := range n {
			wg.Add(1)
			send(holdRequest(b, cs, i), i, func(err error) {
				if err != nil {
					failed.Add(1)
				}
				wg.Done()
			})
		}
		waitFor(b, "all requests held by the server", func() bool { return cs.held(b) == n })
		runtime.GC()
		runtime.ReadMemStats(&m1)
		cs.release(b)
		wg.Wait()
		if failed.Load() > 0 {
			b.Fatalf("%d requests failed", failed.Load())
		}
		return float64(int64(m1.HeapAlloc+m1.StackInuse)-int64(m0.HeapAlloc+m0.StackInuse)) / n
	}
	round()
	b.ResetTimer()
	var sum float64
	for range b.N {
		sum += round()
	}
	b.ReportMetric(sum/float64(b.N), "B/pending")
}
