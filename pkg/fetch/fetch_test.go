package fetch_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/searchfleet/searchfleet/pkg/fetch"
	"github.com/searchfleet/searchfleet/pkg/netguard"
	"github.com/searchfleet/searchfleet/pkg/netguard/netguardtest"
)

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// fetcher fetches through a guard that admits loopback (the test servers) and maps
// the test names of netguardtest.Resolver.
func fetcher(o fetch.Options) *fetch.Fetcher {
	if o.Guard == nil {
		o.Guard = &netguard.Guard{Allow: loopback, Resolver: netguardtest.Resolver}
	}
	return fetch.New(o)
}

func get(t *testing.T, f *fetch.Fetcher, url string) *fetch.Page {
	t.Helper()
	p, err := f.Fetch(t.Context(), url)
	if err != nil {
		t.Fatalf("fetch %s: %v", url, err)
	}
	return p
}

func serve(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

func page(contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		fmt.Fprint(w, body)
	}
}

// Every private address form the SSRF guard (netguard) refuses, web_fetch refuses too, and
// says so without the address it resolved.
func TestFetchRefusesEveryPrivateForm(t *testing.T) {
	t.Parallel()
	f := fetch.New(fetch.Options{Guard: &netguard.Guard{Resolver: netguardtest.Resolver}, Timeout: 2 * time.Second})
	for _, u := range netguardtest.RefusedURLs {
		p := get(t, f, u)
		if p.Error == nil {
			t.Errorf("%q fetched", u)
			continue
		}
		if p.Error.Type != fetch.ErrRefused && p.Error.Type != fetch.ErrInvalidURL {
			t.Errorf("%q: error %s, want %s or %s", u, p.Error, fetch.ErrRefused, fetch.ErrInvalidURL)
		}
		for _, addr := range []string{"10.0.0.5", "169.254.169.254", "127.0.0.1"} {
			if strings.Contains(p.Error.Message, addr) {
				t.Errorf("%q: message %q names the address %s", u, p.Error.Message, addr)
			}
		}
	}
	// A name that resolves to a private address is refused in those words.
	if p := get(t, f, "http://internal.example/x"); p.Error == nil || p.Error.Message != "refused: private address" {
		t.Errorf("internal.example: %+v, want refused: private address", p.Error)
	}
}

// A loopback server is reachable only when the guard's allow-list admits loopback.
func TestFetchLoopbackNeedsTheAllowList(t *testing.T) {
	t.Parallel()
	s := serve(t, page("text/plain", "hello"))
	p := get(t, fetch.New(fetch.Options{}), s.URL)
	if p.Error == nil || p.Error.Type != fetch.ErrRefused {
		t.Fatalf("loopback without allow-list: %+v", p)
	}
	p = get(t, fetcher(fetch.Options{}), s.URL)
	if p.Error != nil || p.Text != "hello" || p.Kind != fetch.KindPage || p.Status != 200 {
		t.Fatalf("loopback with allow-list: %+v", p)
	}
}

// A redirect is checked like the first URL: one to a private address (by name or
// literal, metadata included) is refused; more than MaxRedirects are refused.
func TestFetchRedirects(t *testing.T) {
	t.Parallel()
	f := fetcher(fetch.Options{})
	for _, to := range []string{"http://internal.example/", "http://169.254.169.254/latest/meta-data/", "http://[::ffff:10.0.0.5]/", "file:///etc/passwd"} {
		s := serve(t, func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to, http.StatusFound) })
		p := get(t, f, s.URL)
		if p.Error == nil || p.Error.Type != fetch.ErrRefused {
			t.Errorf("redirect to %s: %+v, want refused", to, p)
		}
	}
	var s *httptest.Server
	s = serve(t, func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscanf(r.URL.Path, "/%d", &n)
		if n == 0 {
			fmt.Fprint(w, "arrived")
			return
		}
		http.Redirect(w, r, fmt.Sprintf("%s/%d", s.URL, n-1), http.StatusMovedPermanently)
	})
	if p := get(t, f, s.URL+"/5"); p.Error != nil || p.Text != "arrived" || p.FinalURL != s.URL+"/0" {
		t.Errorf("5 redirects: %+v", p)
	}
	if p := get(t, f, s.URL+"/6"); p.Error == nil || p.Error.Type != fetch.ErrTooManyRedirect {
		t.Errorf("6 redirects: %+v", p)
	}
}

// A body over the size cap is cut, and the page says truncated.
func TestFetchTruncates(t *testing.T) {
	t.Parallel()
	s := serve(t, page("text/plain", strings.Repeat("word ", 2000)))
	p := get(t, fetcher(fetch.Options{MaxBytes: 1024}), s.URL)
	if p.Error != nil || !p.Truncated || p.Bytes != 1024 {
		t.Fatalf("capped page: truncated=%v bytes=%d err=%v", p.Truncated, p.Bytes, p.Error)
	}
	p = get(t, fetcher(fetch.Options{}), s.URL)
	if p.Truncated || p.Bytes != 10000 {
		t.Fatalf("whole page: truncated=%v bytes=%d", p.Truncated, p.Bytes)
	}
	p = get(t, fetcher(fetch.Options{MaxTextChars: 100}), s.URL)
	if !p.Truncated || len(p.Text) != 100 {
		t.Fatalf("text cap: truncated=%v len=%d", p.Truncated, len(p.Text))
	}
}

// A page's title is cleaned as search titles are: entities decoded into markup are
// stripped, invisible characters dropped, white space collapsed to one line.
func TestFetchTitleCleaned(t *testing.T) {
	t.Parallel()
	f := fetcher(fetch.Options{})
	s := serve(t, page("text/html; charset=utf-8", `<html><head><title>&lt;img src=x onerror=alert(1)&gt;Tide`+"\u200b"+`
	tables &amp;lt;b&amp;gt;Brest</title></head><body><p>High tide.</p></body></html>`))
	if p := get(t, f, s.URL); p.Title != "Tide tables Brest" {
		t.Errorf("title %q, want %q", p.Title, "Tide tables Brest")
	}
}

// A JavaScript app shell and an empty page are named for what they are.
func TestFetchKinds(t *testing.T) {
	t.Parallel()
	f := fetcher(fetch.Options{})
	for _, c := range []struct{ body, kind string }{
		{`<!doctype html><html><head><title>App</title><script src="/a.js"></script></head><body><div id="root"></div><noscript>You need to enable JavaScript to run this app.</noscript><script>window.boot()</script></body></html>`, fetch.KindJSShell},
		{`<!doctype html><html><head><title>Nothing</title></head><body>  <div></div> </body></html>`, fetch.KindEmpty},
		{`<html><body><div id="__next"></div><p>Loading…</p><script src="/_next/main.js"></script></body></html>`, fetch.KindJSShell},
		{`<html><body><nav>Home | About</nav><main><h1>Release notes</h1><p>Version 2 adds fetch.</p><script>track()</script><style>p{}</style></main></body></html>`, fetch.KindPage},
	} {
		s := serve(t, page("text/html; charset=utf-8", c.body))
		p := get(t, f, s.URL)
		if p.Error != nil || p.Kind != c.kind {
			t.Errorf("%.40s…: kind %q err %v, want %q", c.body, p.Kind, p.Error, c.kind)
		}
		if c.kind == fetch.KindPage {
			want := "## Release notes\n\nVersion 2 adds fetch."
			if p.Text != want {
				t.Errorf("readable text %q, want %q", p.Text, want)
			}
		}
		if strings.Contains(c.body, "<title>App<") && p.Title != "App" {
			t.Errorf("title %q", p.Title)
		}
	}
	s := serve(t, page("application/json", "  "))
	if p := get(t, f, s.URL); p.Kind != fetch.KindEmpty {
		t.Errorf("empty JSON: kind %q", p.Kind)
	}
}

// Only HTML, text and JSON are read; a failed status is an error, not a page.
func TestFetchRefusesOtherTypesAndFailures(t *testing.T) {
	t.Parallel()
	f := fetcher(fetch.Options{Timeout: 300 * time.Millisecond})
	png := serve(t, page("image/png", "\x89PNG\r\n\x1a\n"))
	if p := get(t, f, png.URL); p.Error == nil || p.Error.Type != fetch.ErrContentType || !strings.Contains(p.Error.Message, "unsupported content type") {
		t.Errorf("png: %+v", p.Error)
	}
	missing := serve(t, func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	if p := get(t, f, missing.URL); p.Error == nil || p.Error.Type != fetch.ErrHTTPStatus || p.Status != 404 {
		t.Errorf("404: %+v", p)
	}
	hang := serve(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	if p := get(t, f, hang.URL); p.Error == nil || p.Error.Type != fetch.ErrTimeout {
		t.Errorf("hang: %+v", p.Error)
	}
	for _, u := range []string{"", "ftp://example.com/", "not a url", "https://" + strings.Repeat("a", fetch.MaxURLLen)} {
		if p := get(t, f, u); p.Error == nil || p.Error.Type != fetch.ErrInvalidURL {
			t.Errorf("%.30q: %+v", u, p.Error)
		}
	}
}

// A page in another character set is read as the text it is, whichever way it names
// its charset; a UTF-8 page whose first kilobyte is ASCII is not taken for
// Windows-1252 (the guess a missing charset falls back to).
func TestFetchDecodesCharsets(t *testing.T) {
	t.Parallel()
	f := fetcher(fetch.Options{})
	asciiHead := "<!doctype html><html><head><title>News</title>" + strings.Repeat("<script>var x = 1;</script>", 60) + "</head>"
	for _, c := range []struct {
		name, contentType, body, want string
	}{
		// 中文新闻 in GBK, named by the header.
		{"gbk header", "text/html; charset=gbk", "<html><body><p>\xd6\xd0\xce\xc4\xd0\xc2\xce\xc5</p></body></html>", "中文新闻"},
		// 日本語 in Shift_JIS, named by a <meta> only.
		{"shift_jis meta", "text/html", `<html><head><meta charset="shift_jis"></head><body><p>` + "\x93\xfa\x96\x7b\x8c\xea" + `</p></body></html>`, "日本語"},
		// café in ISO-8859-1, plain text.
		{"latin-1 text", "text/plain; charset=iso-8859-1", "caf\xe9 cr\xe8me", "café crème"},
		// UTF-8 with no charset anywhere and an ASCII first kilobyte.
		{"utf-8 unnamed", "text/html", asciiHead + "<body><p>东京 Ünïcode</p></body></html>", "东京 Ünïcode"},
		// A page that calls itself Windows-1252 but is UTF-8 throughout.
		{"mislabelled utf-8", "text/html", `<html><head><meta charset="windows-1252"></head><body><p>naïve 北京</p></body></html>`, "naïve 北京"},
		// JSON is UTF-8.
		{"json", "application/json", `{"city":"北京"}`, `{"city":"北京"}`},
	} {
		s := serve(t, page(c.contentType, c.body))
		p := get(t, f, s.URL)
		if p.Error != nil || !strings.Contains(p.Text, c.want) || !utf8.ValidString(p.Text) {
			t.Errorf("%s: text %q (err %v), want it to contain %q", c.name, p.Text, p.Error, c.want)
		}
	}
}

// A URL with user:password@ is refused before anything is sent (Go's client would send
// them as Basic auth), and the page record does not keep them; a redirect to such a
// URL is refused the same way.
func TestFetchRefusesCredentials(t *testing.T) {
	t.Parallel()
	var auth []string
	var mu sync.Mutex
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://bob:s3cret@"+r.Host+"/page", http.StatusFound)
			return
		}
		page("text/html", "<p>hello</p>")(w, r)
	})
	f := fetcher(fetch.Options{})
	withCreds := strings.Replace(srv.URL, "http://", "http://alice:hunter2@", 1) + "/page"
	p := get(t, f, withCreds)
	if p.Error == nil || p.Error.Type != fetch.ErrInvalidURL || !strings.Contains(p.Error.Message, "without them") {
		t.Errorf("fetch with credentials: %+v, want %s saying what to do", p.Error, fetch.ErrInvalidURL)
	}
	if b, _ := json.Marshal(p); strings.Contains(string(b), "hunter2") || strings.Contains(string(b), "alice") {
		t.Errorf("the page record keeps the credentials: %s", b)
	}
	p = get(t, f, srv.URL+"/redirect")
	if p.Error == nil || p.Error.Type != fetch.ErrRefused {
		t.Errorf("redirect to a URL with credentials: %+v, want %s", p.Error, fetch.ErrRefused)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(auth) != 1 || auth[0] != "" {
		t.Errorf("requests' Authorization headers %q: want only the redirecting request, without credentials", auth)
	}
}

// A file is read whole and as it is, whatever its type, after redirects; a file
// longer than the cap, a 404 and a loopback address without an allow-list are errors
// in words without addresses, and nothing of a refused or oversized file is kept.
func TestFetchFile(t *testing.T) {
	t.Parallel()
	pdf := "%PDF-1.4\n\x00\x01binary"
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/go":
			http.Redirect(w, r, "/doc.pdf", http.StatusFound)
		case "/doc.pdf":
			w.Header().Set("Content-Type", "application/pdf; name=doc.pdf")
			fmt.Fprint(w, pdf)
		case "/big":
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, strings.Repeat("x", 2000)) // chunked: no Content-Length to refuse early
			w.(http.Flusher).Flush()
		default:
			http.NotFound(w, r)
		}
	})
	f := fetcher(fetch.Options{})
	file, err := f.FetchFile(t.Context(), srv.URL+"/go", 1024)
	if err != nil || file.Error != nil || string(file.Content) != pdf || file.ContentType != "application/pdf" || file.FinalURL != srv.URL+"/doc.pdf" {
		t.Fatalf("%+v %v", file, err)
	}
	for _, c := range []struct {
		name, url, kind, words string
		f                      *fetch.Fetcher
	}{
		{"too large", srv.URL + "/big", fetch.ErrLimit, "larger than 1024 bytes", f},
		{"not found", srv.URL + "/missing", fetch.ErrHTTPStatus, "HTTP 404", f},
		{"loopback in production", srv.URL + "/doc.pdf", fetch.ErrRefused, "private address", fetch.New(fetch.Options{})},
		{"credentials", strings.Replace(srv.URL, "http://", "http://a:b@", 1) + "/doc.pdf", fetch.ErrInvalidURL, "without them", f},
		{"not http", "ftp://example.com/doc.pdf", fetch.ErrInvalidURL, "http and https", f},
	} {
		file, err := c.f.FetchFile(t.Context(), c.url, 1024)
		if err != nil || file.Error == nil || file.Error.Type != c.kind || !strings.Contains(file.Error.Message, c.words) || file.Content != nil {
			t.Errorf("%s: %+v %v, want %s saying %q", c.name, file, err, c.kind, c.words)
			continue
		}
		if strings.Contains(file.Error.Message, "127.0.0.1") {
			t.Errorf("%s: the error names the address: %s", c.name, file.Error.Message)
		}
	}
}
