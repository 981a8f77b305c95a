// Package console is the fleet's web console: static pages, embedded in the binary,
// that the ingress serves under /console/ (ingress.Options.Console); the read routes of
// the API they are built on are the ingress's (pkg/ingress, console_api.go). The pages
// call the fleet's public JSON API from the browser with the key the user signs in
// with (kept in the tab's sessionStorage; no key when the API is open), so a tenant
// sees what its key may see through the API and nothing else: its jobs with their
// search traces, answers and citations, its batches with live progress, its spend per
// day and model, and the engines' health.
//
// There is no build step: plain HTML, CSS and JavaScript modules in static/. Every
// text that comes from a job (questions, answers, titles, snippets, URLs) is put into
// the page as text, never as HTML, and a link is made only of an http(s) URL; the
// Content-Security-Policy allows scripts, styles and requests of this origin only.
package console

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// csp allows this origin's scripts, styles and API calls only: no inline script, no
// third-party request, no framing.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Pages serves the console's pages; mount it at "/console/".
func Pages() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix("/console/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
