package h2async

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The servers the interop and differential tests talk to: Go's own (the backend
// below, served over HTTP/2), nginx in front of the same backend, and Node's http2
// module serving the same routes (testdata/h2server.js). Each is started by the test
// on 127.0.0.1 and stopped when it ends.

// testServer is one HTTP/2 server under test.
type testServer struct {
	name  string
	url   string // https:// of its HTTP/2 listener
	roots *x509.CertPool
	// h1URL is an HTTPS listener that does not offer h2 over ALPN ("" if none).
	h1URL string
	// goawayURL is an HTTP/2 listener that ends each connection with GOAWAY after
	// ten requests ("" if none).
	goawayURL string
	// node: the Node-only routes (/push, /goaway) are served.
	node bool
	// cutsCleanly: a response whose upstream was cut ends with END_STREAM, so
	// no client can tell it from a complete one (h2o 2.2.5's proxy does that).
	cutsCleanly bool
}

// needTool finds a server binary. Without it the test is skipped, except in CI
// (CI=true), where a missing server is a failure: scripts/ensure-http2-servers.sh
// installs nginx and h2o, and .ci/run requires Node.js.
func needTool(t testing.TB, name string, alt ...string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, p := range alt {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not installed; the h2async interop tests need it in CI (scripts/ensure-http2-servers.sh installs nginx and h2o; Node.js >= 20 is required)", name)
	}
	t.Skipf("%s is not installed; skipping (scripts/ensure-http2-servers.sh installs nginx and h2o)", name)
	return ""
}

// testCert writes a self-signed certificate for 127.0.0.1 and its key as PEM files
// in dir and returns a pool that trusts it.
func testCert(t testing.TB, dir string) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "h2async interop"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certFile, keyFile, roots
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitListening polls addr until it accepts TCP connections or the process exits.
func waitListening(t testing.TB, addr string, exited <-chan struct{}, logs func() string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-exited:
			t.Fatalf("server exited before listening on %s:\n%s", addr, logs())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s after 30s:\n%s", addr, logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// goServer serves the backend with Go's HTTP/2 server.
func goServer(t testing.TB) *testServer {
	ts := newH2Server(t, backend())
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	return &testServer{name: "go", url: ts.URL, roots: roots}
}

// nginxConf is the generated nginx configuration: an HTTP/2 listener proxying to
// the backend (nginx gzips text/plain itself: the backend is sent no
// Accept-Encoding), one that sends GOAWAY every ten requests, and an HTTP/1.1-only
// TLS listener.
const nginxConf = `
daemon off;
master_process off;
worker_processes 1;
pid {{dir}}/nginx.pid;
error_log {{dir}}/error.log warn;
events { worker_connections 4096; }
http {
	access_log off;
	client_body_temp_path {{dir}}/body;
	proxy_temp_path {{dir}}/proxy;
	fastcgi_temp_path {{dir}}/fastcgi;
	uwsgi_temp_path {{dir}}/uwsgi;
	scgi_temp_path {{dir}}/scgi;
	client_max_body_size 64m;
	ssl_certificate {{cert}};
	ssl_certificate_key {{key}};
	gzip on;
	gzip_types text/plain;
	gzip_proxied any;
	gzip_min_length 256;
	proxy_http_version 1.1;
	proxy_buffering off;
	proxy_set_header Accept-Encoding "";
	proxy_read_timeout 60s;
	server {
		listen 127.0.0.1:{{h2port}} ssl http2;
		location / { proxy_pass http://{{backend}}; }
		location = /push { http2_push /status?code=200; return 200 "push\n"; }
	}
	server {
		listen 127.0.0.1:{{goawayport}} ssl http2;
		keepalive_requests 10;
		location / { proxy_pass http://{{backend}}; }
	}
	server {
		listen 127.0.0.1:{{h1port}} ssl;
		location / { return 200 "h1\n"; }
	}
}
`

// nginxServer starts nginx (as a child process, with its own configuration and
// files in a temporary directory) in front of the backend.
func nginxServer(t testing.TB) *testServer {
	bin := needTool(t, "nginx", "/usr/sbin/nginx")
	be := httptest.NewServer(backend())
	t.Cleanup(be.Close)
	dir := t.TempDir()
	certFile, keyFile, roots := testCert(t, dir)
	h2port, goawayport, h1port := freePort(t), freePort(t), freePort(t)
	conf := strings.NewReplacer("{{dir}}", dir, "{{cert}}", certFile, "{{key}}", keyFile,
		"{{h2port}}", strconv.Itoa(h2port), "{{goawayport}}", strconv.Itoa(goawayport), "{{h1port}}", strconv.Itoa(h1port),
		"{{backend}}", be.Listener.Addr().String()).Replace(nginxConf)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-e", filepath.Join(dir, "error.log"))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	logs := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		return out.String() + string(b)
	}
	for _, p := range []int{h2port, goawayport, h1port} {
		waitListening(t, "127.0.0.1:"+strconv.Itoa(p), exited, logs)
	}
	return &testServer{name: "nginx", url: fmt.Sprintf("https://127.0.0.1:%d", h2port), roots: roots,
		h1URL: fmt.Sprintf("https://127.0.0.1:%d", h1port), goawayURL: fmt.Sprintf("https://127.0.0.1:%d", goawayport)}
}

// h2oConf is the generated h2o configuration: an HTTP/2 listener proxying to the
// backend, compressing text itself, and pushing what a response's Link: preload
// header names (h2o's default) to clients that allow push.
const h2oConf = `
{{user}}
pid-file: {{dir}}/h2o.pid
error-log: {{dir}}/error.log
num-threads: 1
http2-push-preload: ON
listen:
  host: 127.0.0.1
  port: {{port}}
  ssl:
    certificate-file: {{cert}}
    key-file: {{key}}
hosts:
  "127.0.0.1:{{port}}":
    paths:
      "/":
        proxy.reverse.url: "http://{{backend}}/"
    compress: ON
`

// h2oServer starts h2o (a child process with its own configuration) in front of
// the backend.
func h2oServer(t testing.TB) *testServer {
	bin := needTool(t, "h2o", "/usr/sbin/h2o")
	be := httptest.NewServer(backend())
	t.Cleanup(be.Close)
	dir := t.TempDir()
	certFile, keyFile, roots := testCert(t, dir)
	port := freePort(t)
	user := ""
	if os.Geteuid() == 0 {
		user = "user: root"
	}
	conf := strings.NewReplacer("{{user}}", user, "{{dir}}", dir, "{{cert}}", certFile, "{{key}}", keyFile,
		"{{port}}", strconv.Itoa(port), "{{backend}}", be.Listener.Addr().String()).Replace(h2oConf)
	if err := os.WriteFile(filepath.Join(dir, "h2o.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", filepath.Join(dir, "h2o.conf"))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	logs := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		return out.String() + string(b)
	}
	waitListening(t, "127.0.0.1:"+strconv.Itoa(port), exited, logs)
	return &testServer{name: "h2o", url: fmt.Sprintf("https://127.0.0.1:%d", port), roots: roots, cutsCleanly: true}
}

// nodeServer starts testdata/h2server.js with Node's http2 module.
func nodeServer(t testing.TB) *testServer {
	bin := needTool(t, "node")
	dir := t.TempDir()
	certFile, keyFile, roots := testCert(t, dir)
	cmd := exec.Command(bin, filepath.Join("testdata", "h2server.js"), keyFile, certFile)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	var ready struct{ Port int }
	if err != nil || json.Unmarshal([]byte(line), &ready) != nil || ready.Port == 0 {
		t.Fatalf("node server did not start (%q, %v): %s", line, err, stderr.String())
	}
	return &testServer{name: "node", url: fmt.Sprintf("https://127.0.0.1:%d", ready.Port), roots: roots, node: true}
}

// pattern is the body of /bytes?n=N: byte i is i mod 251 (as in h2server.js).
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

// backend serves the routes h2server.js serves, with the same answers.
func backend() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sum := sha256.Sum256(body)
		ct := r.Header.Get("Content-Type")
		if ct == "" {
			ct = "application/octet-stream"
		}
		w.Header().Set("Content-Type", ct)
		w.Header().Set("X-Method", r.Method)
		w.Header().Set("X-Sha256", hex.EncodeToString(sum[:]))
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})
	mux.HandleFunc("/bytes", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.Write(pattern(n))
	})
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if code == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "7")
		}
		w.WriteHeader(code)
		if code != http.StatusNoContent && code != http.StatusNotModified {
			fmt.Fprintf(w, "status %d\n", code)
		}
	})
	mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header()["X-Multi"] = []string{"one", "two"}
		for k, vv := range r.Header {
			if strings.HasPrefix(k, "X-") {
				w.Header().Set("X-Echo-"+k[2:], strings.Join(vv, ", "))
			}
		}
		io.WriteString(w, "headers\n")
	})
	mux.HandleFunc("/sse", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		for i := range n {
			fmt.Fprintf(w, "data: {\"n\":%d}\n\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(5 * time.Millisecond)
		}
		io.WriteString(w, "data: [DONE]\n\n")
	})
	mux.HandleFunc("/stall", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		text := strings.Repeat("the quick brown fox jumps over the lazy dog\n", n)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Vary", "Accept-Encoding")
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			io.WriteString(zw, text)
			zw.Close()
			return
		}
		io.WriteString(w, text)
	})
	mux.HandleFunc("/abort", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("after"))
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(pattern(n))
		w.(http.Flusher).Flush()
		time.Sleep(20 * time.Millisecond)
		panic(http.ErrAbortHandler)
	})
	mux.HandleFunc("/push", func(w http.ResponseWriter, r *http.Request) {
		// h2o pushes what Link: rel=preload names, unless the client disabled push.
		w.Header().Set("Link", "</status?code=200>; rel=preload")
		io.WriteString(w, "push\n")
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "slow\n")
	})
	return mux
}

// clients returns h2async and net/http transports trusting s.
func (s *testServer) h2async(t testing.TB) *Transport {
	tr := &Transport{TLSClientConfig: &tls.Config{RootCAs: s.roots}}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

func (s *testServer) nethttp(t testing.TB) *http.Transport {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.roots}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// do sends a request through rt with a 30s bound and returns the response.
func do(t testing.TB, rt http.RoundTripper, method, url string, body io.Reader) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}
