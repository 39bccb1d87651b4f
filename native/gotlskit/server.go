package gotlskit

// What the servers that read their sites from a JSON file share (quicgo, dtlsgo): the file read strictly, the
// log opened; and the milestone a datagram client names in its sample.

import (
	"encoding/json"
	"fmt"
	"log"
	"net"
	"os"
	"strings"
)

// ReadConfig decodes the JSON file at path into v, refusing unknown fields, and checks its listen address;
// bad input exits 2 naming the field.
func ReadConfig(path string, v any, addr func() string) {
	b, err := os.ReadFile(path)
	if err != nil {
		Usage("--config", err.Error())
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		Usage("--config", fmt.Sprintf("%s: %v", path, err))
	}
	if a := addr(); net.ParseIP(a) == nil {
		Usage("addr", fmt.Sprintf("%q is not an IP address", a))
	}
}

// OpenLog is the server's log: the file at path (appended, 0600), or stderr where none is named.
func OpenLog(path string) *log.Logger {
	w := os.Stderr
	if path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			Usage("log", err.Error())
		}
		w = f
	}
	return log.New(w, "", log.LstdFlags|log.Lmicroseconds)
}

// WireMilestone is where a datagram client's sample ends on the wire: the datagram after Offset payload bytes
// of direction Dir ("c2s", "s2c"), its Edge ("first").
type WireMilestone struct {
	Dir    string `json:"dir"`
	Offset int64  `json:"offset"`
	Edge   string `json:"edge"`
}
