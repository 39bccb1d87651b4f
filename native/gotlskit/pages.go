package gotlskit

import (
	"crypto/rand"
	"net/http"
	"strconv"
	"strings"
)

// PageHandler serves GET /NAME with the named page's bytes: random, so incompressible (as nginx's
// pages), made once at start.
func PageHandler(sizes map[string]int) http.Handler {
	pages := map[string][]byte{}
	for name, n := range sizes {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		pages[name] = b
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := pages[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		_, _ = w.Write(b)
	})
}
