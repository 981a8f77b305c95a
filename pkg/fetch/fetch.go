// Package fetch reads one web page for the web_fetch server tool: through the netguard
// SSRF guard (no private, loopback, link-local or metadata address, checked when the
// name is resolved and again on the very socket; every redirect checked the same
// way), with a size and a time cap, and only for the content types a model can read.
// HTML is reduced to its readable text. The result is honest: a capped page says
// truncated, a page with no readable text says whether it is a JavaScript app shell
// or empty, and a failure is a typed error the model reads, never an empty page.
//
// FetchFile reads a file a client gave by URL (a Responses input_file's file_url)
// through the same guard and caps, whole and as it is.
package fetch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/html/charset"

	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/netguard"
)

// Defaults of Options.
const (
	DefaultMaxBytes     = 2 << 20
	DefaultTimeout      = 15 * time.Second
	DefaultMaxTextChars = 50_000
	MaxRedirects        = 5
	// MaxURLLen bounds a URL the model asks for (the guard's own bound is the same).
	MaxURLLen = 2048
)

// Page kinds.
const (
	KindPage    = "page"     // readable text
	KindJSShell = "js_shell" // HTML that is a JavaScript app's shell: no text without running it
	KindEmpty   = "empty"    // no readable content at all
)

// Error types, as the model reads them (engines.CitationError.Type).
const (
	ErrInvalidURL      = "FETCH_INVALID_URL"
	ErrRefused         = "FETCH_REFUSED"
	ErrUnreachable     = "FETCH_UNREACHABLE"
	ErrTimeout         = "FETCH_TIMEOUT"
	ErrHTTPStatus      = "FETCH_HTTP_ERROR"
	ErrContentType     = "FETCH_UNSUPPORTED_CONTENT_TYPE"
	ErrTooManyRedirect = "FETCH_TOO_MANY_REDIRECTS"
	ErrLimit           = "FETCH_LIMIT_REACHED"
	ErrUnavailable     = "FETCH_UNAVAILABLE"
)

// readable are the content types a fetched page may have.
var readable = map[string]bool{"text/html": true, "application/xhtml+xml": true, "text/plain": true, "application/json": true}

// Page is one fetched page, or why it could not be fetched (Error).
type Page struct {
	// URL is the URL asked for; FinalURL the one that answered, after redirects.
	URL      string `json:"url"`
	FinalURL string `json:"final_url,omitempty"`
	Status   int    `json:"status,omitempty"`
	// ContentType is the media type, without parameters.
	ContentType string `json:"content_type,omitempty"`
	Title       string `json:"title,omitempty"`
	// Text is the page's readable text (HTML reduced; text and JSON as they are).
	Text string `json:"text,omitempty"`
	// Bytes is how much of the body was read.
	Bytes int64 `json:"bytes"`
	// Truncated says the body or its text was longer than the caps: Text is the
	// beginning of the page.
	Truncated bool   `json:"truncated,omitempty"`
	Kind      string `json:"kind,omitempty"`
	// Error is set when the page could not be fetched.
	Error *Error `json:"error,omitempty"`
	// Retrieved is when the page was read.
	Retrieved time.Time `json:"retrieved,omitzero"`
}

// Error is a failed fetch: a type the model can branch on and a message it reads.
// Messages never carry resolved addresses.
type Error struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Type + ": " + e.Message }

// Options configure a Fetcher.
type Options struct {
	// Guard checks every address a fetch reaches (its Allow list is the only way to
	// reach a private address: tests allow loopback).
	Guard *netguard.Guard
	// MaxBytes caps the body read (DefaultMaxBytes); MaxTextChars the text kept.
	MaxBytes     int64
	MaxTextChars int
	// Timeout bounds a whole fetch, redirects included (DefaultTimeout).
	Timeout time.Duration
	// UserAgent is sent with every request.
	UserAgent string
}

// Fetcher fetches pages. It is safe for concurrent use.
type Fetcher struct {
	o  Options
	hc *http.Client
}

// New returns a Fetcher whose connections all go through o.Guard's DialContext
// (netguard.NewClient: no proxy, no automatic redirects; Fetch follows them itself,
// checking each).
func New(o Options) *Fetcher {
	o.Guard = cmp.Or(o.Guard, &netguard.Guard{})
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxTextChars <= 0 {
		o.MaxTextChars = DefaultMaxTextChars
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	o.UserAgent = cmp.Or(o.UserAgent, "searchfleet-web-fetch/1")
	return &Fetcher{o: o, hc: netguard.NewClient(o.Guard)}
}

// CheckURL reads a URL the model gave: absolute http(s) with a host, at most
// MaxURLLen bytes. It does not resolve it (Fetch does, through the guard).
func CheckURL(raw string) (*url.URL, *Error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, &Error{Type: ErrInvalidURL, Message: "the url is empty"}
	}
	if len(raw) > MaxURLLen {
		return nil, &Error{Type: ErrInvalidURL, Message: fmt.Sprintf("the url is longer than %d bytes", MaxURLLen)}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || u.Hostname() == "" {
		return nil, &Error{Type: ErrInvalidURL, Message: "the url is not an absolute http or https URL"}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, &Error{Type: ErrInvalidURL, Message: "only http and https URLs can be fetched"}
	}
	if u.User != nil {
		return nil, errCredentials
	}
	return u, nil
}

// errCredentials refuses a URL with a user name or password: Go's HTTP client sends
// them as Basic auth, and a page's URL is kept in the job's trace.
var errCredentials = &Error{Type: ErrInvalidURL, Message: "the url carries a user name or password (user:password@host); " +
	"the fleet never sends credentials: give the URL without them"}

// withoutCredentials is raw with any user:password@ removed: the form a Page keeps.
func withoutCredentials(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.User == nil {
		return raw
	}
	u.User = nil
	return u.String()
}

// Fetch fetches a page. A page that cannot be fetched is a Page with Error; the
// error return is only the caller's context ending (shutting down: another worker
// takes the fetch).
func (f *Fetcher) Fetch(ctx context.Context, raw string) (*Page, error) {
	p := &Page{URL: withoutCredentials(raw)}
	u, perr := CheckURL(raw)
	if perr != nil {
		p.Error = perr
		return p, nil
	}
	fctx, cancel := context.WithTimeout(ctx, f.o.Timeout)
	defer cancel()
	resp, final, perr := f.follow(fctx, u, acceptPage)
	if perr != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		p.Error = perr
		return p, nil
	}
	defer resp.Body.Close()
	p.FinalURL, p.Status, p.Retrieved = final.String(), resp.StatusCode, time.Now().UTC()
	if resp.StatusCode >= 400 {
		p.Error = &Error{Type: ErrHTTPStatus, Message: fmt.Sprintf("the page answered HTTP %d", resp.StatusCode)}
		return p, nil
	}
	body, truncated, err := readCapped(resp.Body, f.o.MaxBytes)
	p.Bytes, p.Truncated = int64(len(body)), truncated
	if err != nil && len(body) == 0 {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		p.Error = transportError(fctx, err)
		return p, nil
	}
	if err != nil {
		p.Truncated = true // cut short (the time cap): what came is kept, and said to be partial
	}
	mt := mediaType(resp.Header.Get("Content-Type"), body)
	p.ContentType = mt
	if !readable[mt] {
		p.Error = &Error{Type: ErrContentType, Message: "unsupported content type " + mt + ": only HTML, plain text and JSON pages can be read"}
		return p, nil
	}
	body = toUTF8(body, mt, resp.Header.Get("Content-Type"))
	if mt == "text/html" || mt == "application/xhtml+xml" {
		d := Readable(body)
		p.Title, p.Text, p.Kind = cleanTitle(d.Title), d.Text, d.Kind
	} else {
		p.Text = strings.TrimSpace(string(body))
		p.Kind = KindPage
		if p.Text == "" {
			p.Kind = KindEmpty
		}
	}
	if cut, ok := CutRunes(p.Text, f.o.MaxTextChars); ok {
		p.Text, p.Truncated = cut, true
	}
	return p, nil
}

// Accept headers: a page's (Fetch) and a file's (FetchFile).
const (
	acceptPage = "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.1"
	acceptFile = "*/*"
)

// File is a file read whole (FetchFile), or why it could not be read (Error).
type File struct {
	// URL is the URL asked for, without credentials; FinalURL the one that answered.
	URL      string `json:"url"`
	FinalURL string `json:"final_url,omitempty"`
	// ContentType is the media type the server named, without parameters ("" when it
	// named none).
	ContentType string `json:"content_type,omitempty"`
	Content     []byte `json:"-"`
	Error       *Error `json:"error,omitempty"`
}

// FetchFile reads the file at raw whole, whatever its content type, through the same
// guard, redirect rule and time cap (Options.Timeout) as Fetch. A file longer than
// max bytes (0: Options.MaxBytes) is an ErrLimit error, never cut short: a file is
// read whole or not at all. The error return is only ctx ending.
func (f *Fetcher) FetchFile(ctx context.Context, raw string, max int64) (*File, error) {
	if max <= 0 {
		max = f.o.MaxBytes
	}
	file := &File{URL: withoutCredentials(raw)}
	u, perr := CheckURL(raw)
	if perr != nil {
		file.Error = perr
		return file, nil
	}
	fctx, cancel := context.WithTimeout(ctx, f.o.Timeout)
	defer cancel()
	fail := func(e *Error) (*File, error) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		file.Error = e
		return file, nil
	}
	resp, final, perr := f.follow(fctx, u, acceptFile)
	if perr != nil {
		return fail(perr)
	}
	defer resp.Body.Close()
	file.FinalURL = withoutCredentials(final.String())
	if resp.StatusCode >= 400 {
		return fail(&Error{Type: ErrHTTPStatus, Message: fmt.Sprintf("the server answered HTTP %d", resp.StatusCode)})
	}
	if resp.ContentLength > max {
		return fail(fileTooLarge(max))
	}
	body, truncated, err := readCapped(resp.Body, max)
	switch {
	case truncated:
		return fail(fileTooLarge(max))
	case err != nil:
		return fail(transportError(fctx, err))
	}
	if h := resp.Header.Get("Content-Type"); h != "" {
		if mt, _, err := mime.ParseMediaType(h); err == nil {
			file.ContentType = strings.ToLower(mt)
		}
	}
	file.Content = body
	return file, nil
}

// fileTooLarge is the error of a file longer than max bytes.
func fileTooLarge(max int64) *Error {
	return &Error{Type: ErrLimit, Message: fmt.Sprintf("the file is larger than %d bytes", max)}
}

// follow sends GET u and follows up to MaxRedirects redirects, checking every URL
// with the guard before connecting (the guard's dialer checks the socket again).
func (f *Fetcher) follow(ctx context.Context, u *url.URL, accept string) (*http.Response, *url.URL, *Error) {
	for hop := 0; ; hop++ {
		if _, err := f.o.Guard.CheckURL(ctx, u.String()); err != nil {
			return nil, nil, guardError(ctx, err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return nil, nil, &Error{Type: ErrInvalidURL, Message: "the url is not a valid request URL"}
		}
		req.Header.Set("User-Agent", f.o.UserAgent)
		req.Header.Set("Accept", accept)
		resp, err := f.hc.Do(req)
		if err != nil {
			return nil, nil, transportError(ctx, err)
		}
		if resp.StatusCode < 300 || resp.StatusCode >= 400 || resp.Header.Get("Location") == "" {
			return resp, u, nil
		}
		loc, err := u.Parse(resp.Header.Get("Location"))
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if err != nil {
			return nil, nil, &Error{Type: ErrInvalidURL, Message: "the page redirected to an unreadable location"}
		}
		if hop >= MaxRedirects {
			return nil, nil, &Error{Type: ErrTooManyRedirect, Message: fmt.Sprintf("the page redirected more than %d times", MaxRedirects)}
		}
		if loc.Scheme != "http" && loc.Scheme != "https" {
			return nil, nil, &Error{Type: ErrRefused, Message: "refused: the page redirected to a non-http URL"}
		}
		if loc.User != nil {
			return nil, nil, &Error{Type: ErrRefused, Message: "refused: the page redirected to a URL with a user name or password (the fleet never sends credentials)"}
		}
		u = loc
	}
}

// guardError says why the guard refused, without the addresses it resolved.
func guardError(ctx context.Context, err error) *Error {
	if errors.Is(err, netguard.ErrRefused) {
		return refused(err)
	}
	if ctx.Err() != nil {
		return &Error{Type: ErrTimeout, Message: "the fetch timed out"}
	}
	// A lookup that timed out (a name that does not resolve, or resolves privately,
	// is refused as a private address: netguard).
	return &Error{Type: ErrUnreachable, Message: "the host could not be resolved"}
}

// refused is the error of an address the guard refused: a private one, or a host
// written so that it cannot be checked (numeric-looking, non-ASCII). The guard's own
// words name the address: they go nowhere.
func refused(err error) *Error {
	if errors.Is(err, netguard.ErrNotPublic) {
		return &Error{Type: ErrRefused, Message: "refused: the host has no public address"}
	}
	return &Error{Type: ErrRefused, Message: "refused: the url's host may not be fetched"}
}

// transportError says why a connection or a read failed, in words without addresses.
func transportError(ctx context.Context, err error) *Error {
	switch {
	case errors.Is(err, netguard.ErrRefused):
		return refused(err)
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return &Error{Type: ErrTimeout, Message: "the fetch timed out"}
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return &Error{Type: ErrTimeout, Message: "the fetch timed out"}
	}
	return &Error{Type: ErrUnreachable, Message: "the page could not be reached"}
}

// readCapped reads at most max bytes of r; truncated says there was more.
func readCapped(r io.Reader, max int64) ([]byte, bool, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if int64(len(b)) > max {
		return b[:max], true, nil
	}
	return b, false, err
}

// mediaType is a response's media type, sniffed from the body when the header
// names none.
func mediaType(header string, body []byte) string {
	if header == "" {
		header = http.DetectContentType(body)
	}
	mt, _, err := mime.ParseMediaType(header)
	if err != nil {
		return "application/octet-stream"
	}
	return strings.ToLower(mt)
}

// toUTF8 decodes a page written in another character set (GBK, Shift_JIS,
// Windows-1252, …: named by the Content-Type header, a byte order mark or, in HTML,
// a <meta> charset) to UTF-8, which the rest of the fleet speaks. A guess (no header,
// BOM or meta) gives way to a body that is valid UTF-8 as a whole: the guess looks at
// the first 1 KB only, where a UTF-8 page often has nothing but ASCII. JSON is UTF-8
// (RFC 8259) unless its header says otherwise.
func toUTF8(body []byte, mt, header string) []byte {
	if mt == "application/json" && !strings.Contains(strings.ToLower(header), "charset=") {
		return body
	}
	enc, name, certain := charset.DetermineEncoding(body, header)
	if name == "utf-8" || !certain && utf8.Valid(body) {
		return body
	}
	out, err := enc.NewDecoder().Bytes(body)
	if err != nil {
		return body
	}
	return out
}

// CutRunes returns s cut to n characters, and whether it was cut.
func CutRunes(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	for k := range s {
		if n == 0 {
			return s[:k], true
		}
		n--
	}
	return s, false
}

// maxTitle bounds a page's title, in bytes.
const maxTitle = 1000

// cleanTitle is a page's title cleaned as search titles are: plain text without markup
// once its entities are decoded (engines.PlainText: "&lt;img …&gt;" does not become a
// tag), without invisible characters, on one line, at most maxTitle bytes.
func cleanTitle(s string) string {
	s = collapse(engines.PlainText(s))
	if len(s) > maxTitle {
		n := maxTitle
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return s
}
