package gotlskit

// Names of TLS groups and signature schemes as pqtimer (OpenSSL) prints them, so samples of every
// stack compare; Go's own String() names (CurveP256, ECDSAWithP256AndSHA256, ...) never leave this file.

import (
	"crypto/tls"
	"fmt"
	"strconv"
	"strings"
)

type GroupName struct {
	ID      tls.CurveID
	Name    string   // as OpenSSL's SSL_get0_group_name prints it
	Aliases []string // accepted on the command line too (pqbench catalog names, Go's names)
}

// KnownGroups: every group a pqbench cell may ask for that has an IANA code point. Which of them Go
// really implements is not taken from here: `capabilities` of tlsgo and quicgo tries each in a handshake.
var KnownGroups = []GroupName{
	{tls.X25519, "x25519", []string{"X25519"}},
	{tls.CurveP256, "secp256r1", []string{"P-256", "prime256v1", "CurveP256"}},
	{tls.CurveP384, "secp384r1", []string{"P-384", "CurveP384"}},
	{tls.CurveP521, "secp521r1", []string{"P-521", "CurveP521"}},
	{tls.X25519MLKEM768, "X25519MLKEM768", nil},
	{tls.SecP256r1MLKEM768, "SecP256r1MLKEM768", nil},
	{tls.SecP384r1MLKEM1024, "SecP384r1MLKEM1024", nil},
	{tls.MLKEM1024, "MLKEM1024", nil},
	// Code points Go 1.27 does not name; listed so `capabilities` reports them as tried.
	{tls.CurveID(0x0200), "MLKEM512", nil},
	{tls.CurveID(0x0201), "MLKEM768", nil},
	{tls.CurveID(0x001e), "x448", []string{"X448"}},
	{tls.CurveID(0x0100), "ffdhe2048", nil},
	{tls.CurveID(0x0101), "ffdhe3072", nil},
}

func GroupString(id tls.CurveID) string {
	for _, g := range KnownGroups {
		if g.ID == id {
			return g.Name
		}
	}
	return fmt.Sprintf("0x%04x", uint16(id))
}

// ParseGroup accepts an OpenSSL/pqbench name (any case) or a code point (0x11ec, 4588).
func ParseGroup(s string) (tls.CurveID, error) {
	for _, g := range KnownGroups {
		if strings.EqualFold(s, g.Name) {
			return g.ID, nil
		}
		for _, a := range g.Aliases {
			if strings.EqualFold(s, a) {
				return g.ID, nil
			}
		}
	}
	if v, err := strconv.ParseUint(s, 0, 16); err == nil {
		return tls.CurveID(v), nil
	}
	names := make([]string, 0, len(KnownGroups))
	for _, g := range KnownGroups {
		names = append(names, g.Name)
	}
	return 0, fmt.Errorf("unknown group %q (known: %s, or a code point such as 0x11ec)", s, strings.Join(names, ", "))
}

func ParseGroups(list string) ([]tls.CurveID, error) {
	var out []tls.CurveID
	for _, s := range strings.Split(list, ":") {
		if s == "" {
			continue
		}
		id, err := ParseGroup(s)
		if err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty group list")
	}
	return out, nil
}

var sigalgNames = map[tls.SignatureScheme]string{
	tls.ECDSAWithP256AndSHA256:  "ecdsa_secp256r1_sha256",
	tls.ECDSAWithP384AndSHA384:  "ecdsa_secp384r1_sha384",
	tls.ECDSAWithP521AndSHA512:  "ecdsa_secp521r1_sha512",
	tls.Ed25519:                 "ed25519",
	tls.SignatureScheme(0x0808): "ed448",
	tls.PSSWithSHA256:           "rsa_pss_rsae_sha256",
	tls.PSSWithSHA384:           "rsa_pss_rsae_sha384",
	tls.PSSWithSHA512:           "rsa_pss_rsae_sha512",
	tls.SignatureScheme(0x0809): "rsa_pss_pss_sha256",
	tls.SignatureScheme(0x080a): "rsa_pss_pss_sha384",
	tls.SignatureScheme(0x080b): "rsa_pss_pss_sha512",
	tls.PKCS1WithSHA256:         "rsa_pkcs1_sha256",
	tls.PKCS1WithSHA384:         "rsa_pkcs1_sha384",
	tls.PKCS1WithSHA512:         "rsa_pkcs1_sha512",
	tls.PKCS1WithSHA1:           "rsa_pkcs1_sha1",
	tls.ECDSAWithSHA1:           "ecdsa_sha1",
	tls.MLDSA44:                 "mldsa44",
	tls.MLDSA65:                 "mldsa65",
	tls.MLDSA87:                 "mldsa87",
}

func SigalgString(s tls.SignatureScheme) string {
	if n, ok := sigalgNames[s]; ok {
		return n
	}
	return fmt.Sprintf("0x%04x", uint16(s))
}
