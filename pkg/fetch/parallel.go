package fetch

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// PageFetcher reads one page for web_fetch: a Fetcher (the fleet reads the page
// itself) or Parallel (Parallel's Extract API reads it). A page that cannot be read is
// a Page with Error; the error return is only the caller's context ending.
type PageFetcher interface {
	Fetch(ctx context.Context, raw string) (*Page, error)
}

// Parallel reads pages through Parallel's Extract API: POST {base}/v1/extract
// (default base https://api.parallel.ai) with the x-api-key header, one URL a call,
// its full content asked (markdown, at most MaxTextChars). Parallel fetches the page
// (or reads its index), so the fleet's SSRF guard is not involved; the URL is checked
// as Fetch checks it. A URL Parallel could not read comes back in its errors list,
// and is the page's error; a refused call (key, quota, rate limit, outage) is
// ErrUnavailable, naming the status.
type Parallel struct{ o ParallelOptions }

// ParallelOptions configure a Parallel fetcher.
type ParallelOptions struct {
	// BaseURL is the API's base ("": https://api.parallel.ai); APIKey its key.
	BaseURL, APIKey string
	// Client makes the calls (nil: http.DefaultClient).
	Client *http.Client
	// MaxTextChars caps a page's text (DefaultMaxTextChars); Timeout bounds a call
	// (DefaultTimeout).
	MaxTextChars int
	Timeout      time.Duration
}

// NewParallel returns a Parallel fetcher.
func NewParallel(o ParallelOptions) *Parallel {
	o.BaseURL = cmp.Or(strings.TrimRight(o.BaseURL, "/"), "https://api.parallel.ai")
	o.Client = cmp.Or(o.Client, http.DefaultClient)
	if o.MaxTextChars <= 0 {
		o.MaxTextChars = DefaultMaxTextChars
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	return &Parallel{o: o}
}

type parallelExtractRequest struct {
	URLs             []string `json:"urls"`
	AdvancedSettings struct {
		FullContent struct {
			MaxCharsPerResult int `json:"max_chars_per_result"`
		} `json:"full_content"`
	} `json:"advanced_settings"`
}

type parallelExtractResponse struct {
	Results []struct {
		URL         string   `json:"url"`
		Title       string   `json:"title"`
		Excerpts    []string `json:"excerpts"`
		FullContent string   `json:"full_content"`
	} `json:"results"`
	Errors []struct {
		URL            string `json:"url"`
		ErrorType      string `json:"error_type"`
		HTTPStatusCode int    `json:"http_status_code"`
	} `json:"errors"`
}

// Fetch reads the page at raw through the Extract API.
func (p *Parallel) Fetch(ctx context.Context, raw string) (*Page, error) {
	page := &Page{URL: withoutCredentials(raw)}
	u, perr := CheckURL(raw)
	if perr != nil {
		page.Error = perr
		return page, nil
	}
	var body parallelExtractRequest
	body.URLs = []string{u.String()}
	body.AdvancedSettings.FullContent.MaxCharsPerResult = p.o.MaxTextChars + 1 // one more: a cut page is seen
	b, _ := json.Marshal(body)
	fctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(fctx, http.MethodPost, p.o.BaseURL+"/v1/extract", bytes.NewReader(b))
	if err != nil {
		page.Error = &Error{Type: ErrUnavailable, Message: "the fetch service could not be called"}
		return page, nil
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", p.o.APIKey)
	resp, err := p.o.Client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		page.Error = &Error{Type: ErrUnavailable, Message: "the fetch service did not answer"}
		if fctx.Err() != nil {
			page.Error = &Error{Type: ErrTimeout, Message: "the fetch service did not answer in time"}
		}
		return page, nil
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode/100 != 2 || err != nil {
		page.Error = &Error{Type: ErrUnavailable, Message: fmt.Sprintf("the fetch service answered HTTP %d", resp.StatusCode)}
		return page, nil
	}
	var out parallelExtractResponse
	if err := json.Unmarshal(data, &out); err != nil {
		page.Error = &Error{Type: ErrUnavailable, Message: "the fetch service's answer could not be read"}
		return page, nil
	}
	page.Retrieved = time.Now().UTC()
	if len(out.Results) == 0 {
		page.Error = &Error{Type: ErrUnreachable, Message: "the page could not be read"}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			page.Status = e.HTTPStatusCode
			page.Error.Message = fmt.Sprintf("the page could not be read (%s)", e.ErrorType)
			if e.HTTPStatusCode >= 400 {
				page.Error = &Error{Type: ErrHTTPStatus, Message: fmt.Sprintf("the page answered HTTP %d", e.HTTPStatusCode)}
			}
		}
		return page, nil
	}
	r := out.Results[0]
	page.FinalURL, page.Status, page.ContentType = r.URL, http.StatusOK, "text/markdown"
	page.Title = cleanTitle(r.Title)
	page.Text = cmp.Or(strings.TrimSpace(r.FullContent), strings.TrimSpace(strings.Join(r.Excerpts, "\n\n")))
	page.Bytes = int64(len(page.Text))
	page.Kind = KindPage
	if page.Text == "" {
		page.Kind = KindEmpty
	}
	if cut, ok := CutRunes(page.Text, p.o.MaxTextChars); ok {
		page.Text, page.Truncated = cut, true
	}
	return page, nil
}
