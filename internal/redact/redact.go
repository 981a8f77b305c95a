// Package redact hides secrets in what the fleet logs or shows: a leaf package, so
// the transport (pkg/bus) and the config layer can both use it without depending on
// each other.
package redact

import "net/url"

// URL hides a URL's password (and a user that may be a token).
func URL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	u.User = url.User("***")
	return u.String()
}
