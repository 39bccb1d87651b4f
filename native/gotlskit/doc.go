// Package gotlskit holds what the Go stacks tlsgo (crypto/tls over TCP) and quicgo (quic-go over UDP)
// share: OpenSSL's names of groups and signature schemes, the command line, pqtimer's instruments
// (clock, CPU wait, shared sample counter), the sample loop and the capability probes. Each stack
// keeps only what its transport changes.
package gotlskit
