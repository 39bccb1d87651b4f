package gotlskit

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Program prefixes every message to stderr ("tlsgo", "quicgo"); main sets it first.
var Program = "gotlskit"

// Usage reports bad input naming the field and exits 2.
func Usage(field, msg string) {
	fmt.Fprintf(os.Stderr, "%s: %s: %s\n", Program, field, msg)
	os.Exit(2)
}

// Options: "--name value" pairs; repeated names keep every value.
type Options map[string][]string

func ParseOptions(args []string, allowed ...string) Options {
	ok := map[string]bool{}
	for _, a := range allowed {
		ok[a] = true
	}
	o := Options{}
	for i := 0; i < len(args); i += 2 {
		name := args[i]
		if !ok[name] {
			Usage(name, "unknown option (allowed: "+strings.Join(allowed, " ")+")")
		}
		if i+1 >= len(args) {
			Usage(name, "missing value")
		}
		o[name] = append(o[name], args[i+1])
	}
	return o
}

func (o Options) Str(name, def string) string {
	if v := o[name]; len(v) > 0 {
		return v[len(v)-1]
	}
	return def
}

func (o Options) Required(name string) string {
	v := o.Str(name, "")
	if v == "" {
		Usage(name, "required")
	}
	return v
}

func (o Options) Int(name string, def, lo, hi int) int {
	s := o.Str(name, "")
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		Usage(name, fmt.Sprintf("'%s' is not a whole number in %d..%d", s, lo, hi))
	}
	return v
}

// Command is a subcommand: its name and what it runs on the arguments after it (its exit status).
type Command struct {
	Name string
	Run  func(args []string) int
}

// Main runs the subcommand named by os.Args[1] and exits with its status.
func Main(commands ...Command) {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.Name
	}
	if len(os.Args) < 2 {
		Usage("a subcommand", strings.Join(names, ", "))
	}
	for _, c := range commands {
		if c.Name == os.Args[1] {
			os.Exit(c.Run(os.Args[2:]))
		}
	}
	Usage(os.Args[1], "unknown subcommand (allowed: "+strings.Join(names, ", ")+")")
}
