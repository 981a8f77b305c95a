package search

import "testing"

// A URL's fetch address ignores what does not change the page a server sends (the
// case of scheme and host, a fragment, surrounding space) and nothing else; it never
// equals a search's.
func TestFetchAddress(t *testing.T) {
	a := FetchAddress("https://docs.example/Guide?v=2")
	for _, same := range []string{" HTTPS://Docs.Example/Guide?v=2 ", "https://docs.example/Guide?v=2#install"} {
		if FetchAddress(same) != a {
			t.Errorf("%q has another address", same)
		}
	}
	for _, other := range []string{"https://docs.example/guide?v=2", "https://docs.example/Guide?v=3", "http://docs.example/Guide?v=2"} {
		if FetchAddress(other) == a {
			t.Errorf("%q has the same address", other)
		}
	}
}
