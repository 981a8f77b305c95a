package provider

import "strings"

// Redact removes every occurrence of each secret (an API key, an access token) from
// s. Secrets shorter than 4 bytes are left alone: they would blank out ordinary text
// and are no secret anyway.
func Redact(s string, secrets ...string) string {
	for _, k := range secrets {
		if len(k) >= 4 && strings.Contains(s, k) {
			s = strings.ReplaceAll(s, k, "[REDACTED]")
		}
	}
	return s
}
