// Package sshkeys: host and user keys for pqbench's Go SSH endpoints, named by pqbench's SSH host key
// names, and what this build of golang.org/x/crypto/ssh supports.
//
// A host key name is an SSH public key algorithm (ssh-ed25519, ecdsa-sha2-nistp256, rsa-sha2-256,
// ssh-mldsa-44, ...). RSA names may carry the modulus size: rsa-sha2-256-2048, rsa-sha2-512-4096
// (no suffix: 3072 bits). A size-only host key, sizeonly-<signature> (see cert.go), is an ed25519 host
// certificate: its name negotiates CertAlg.
package sshkeys

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
)

// DefaultRSABits is the modulus of an RSA host key whose name carries no size.
const DefaultRSABits = 3072

// Split returns the SSH algorithm of a host key name and the RSA modulus size (0 for other keys).
func Split(name string) (alg string, bits int, err error) {
	if rest, ok := strings.CutPrefix(name, SizeOnlyPrefix); ok {
		if rest == "" {
			return "", 0, fmt.Errorf("%q: a size-only host key names the signature it stands for (sizeonly-ALG)", name)
		}
		return CertAlg, 0, nil
	}
	for _, base := range []string{ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSASHA512} {
		if name == base {
			return base, DefaultRSABits, nil
		}
		if rest, ok := strings.CutPrefix(name, base+"-"); ok {
			b, err := strconv.Atoi(rest)
			if err != nil || b < 2048 || b > 16384 {
				return "", 0, fmt.Errorf("%q: the RSA size must be a number of bits from 2048 to 16384", name)
			}
			return base, b, nil
		}
	}
	return name, 0, nil
}

// Generate makes a private key for the host key name.
func Generate(name string) (crypto.Signer, error) {
	alg, bits, err := Split(name)
	if err != nil {
		return nil, err
	}
	switch alg {
	case ssh.KeyAlgoED25519:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return k, err
	case ssh.KeyAlgoECDSA256:
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case ssh.KeyAlgoECDSA384:
		return ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case ssh.KeyAlgoECDSA521:
		return ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSASHA512:
		return rsa.GenerateKey(rand.Reader, bits)
	}
	if k, err := generateMLDSA(alg); k != nil || err != nil {
		return k, err
	}
	return nil, fmt.Errorf("%q is not a host key algorithm this build can generate (have: %s)", name,
		strings.Join(HostKeys(), ", "))
}

// Write stores a private key at path (0600; OpenSSH format where x/crypto writes it, else PKCS#8 PEM,
// both read by Load) and its public half at path.pub in authorized_keys format.
func Write(key crypto.Signer, path string) error {
	var block *pem.Block
	var err error
	if isMLDSA(key) {
		der, e := x509.MarshalPKCS8PrivateKey(key)
		block, err = &pem.Block{Type: "PRIVATE KEY", Bytes: der}, e
	} else {
		block, err = ssh.MarshalPrivateKey(key, "pqbench")
	}
	if err != nil {
		return err
	}
	if err := writeFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return err
	}
	pub, err := ssh.NewPublicKey(key.Public())
	if err != nil {
		return err
	}
	return writeFile(path+".pub", ssh.MarshalAuthorizedKey(pub), 0o644)
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	_ = os.Remove(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Load reads a private key written by Write or by OpenSSH's ssh-keygen.
func Load(path string) (ssh.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := ssh.ParsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// LoadPublic reads the first key of an authorized_keys-format file.
func LoadPublic(path string) (ssh.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k, _, _, _, err := ssh.ParseAuthorizedKey(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// HostSigner restricts a host key to the one signature algorithm of the name (an RSA key would
// otherwise offer rsa-sha2-256, rsa-sha2-512 and ssh-rsa).
func HostSigner(key ssh.Signer, name string) (ssh.Signer, error) {
	alg, _, err := Split(name)
	if err != nil {
		return nil, err
	}
	as, ok := key.(ssh.AlgorithmSigner)
	if !ok {
		return key, nil
	}
	return ssh.NewSignerWithAlgorithms(as, []string{alg})
}

// KeyExchanges lists the key exchanges this build implements (insecure ones excluded).
func KeyExchanges() []string {
	var out []string
	for _, k := range ssh.SupportedAlgorithms().KeyExchanges {
		if !strings.Contains(k, "@") {
			out = append(out, k)
		}
	}
	return out
}

// HostKeys lists the host key algorithms this build implements: plain keys, and of the certificates
// only CertAlg (what size-only host keys negotiate).
func HostKeys() []string {
	var out []string
	for _, k := range ssh.SupportedAlgorithms().HostKeys {
		plain := !strings.Contains(k, "-cert-") && !strings.HasPrefix(k, "sk-")
		if plain || k == CertAlg {
			out = append(out, k)
		}
	}
	return out
}

// Supported says whether kex and host key name are implemented here, and why not if not.
func Supported(kex, hostkey string) error {
	if kex != "" && !slices.Contains(KeyExchanges(), kex) {
		return fmt.Errorf("key exchange %q is not implemented by golang.org/x/crypto/ssh %s", kex, CryptoVersion())
	}
	if hostkey != "" {
		alg, _, err := Split(hostkey)
		if err != nil {
			return err
		}
		if !slices.Contains(HostKeys(), alg) {
			return fmt.Errorf("host key %q is not implemented by golang.org/x/crypto/ssh %s with %s", hostkey,
				CryptoVersion(), runtime.Version())
		}
	}
	return nil
}

// CryptoVersion is the golang.org/x/crypto module version this binary was built with.
func CryptoVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "golang.org/x/crypto" {
				return d.Version
			}
		}
	}
	return "unknown"
}

// Capabilities is what --capabilities prints (JSON).
func Capabilities(role string) map[string]any {
	return map[string]any{"role": role, "go": runtime.Version(), "x_crypto": CryptoVersion(),
		"kex": KeyExchanges(), "hostkeys": HostKeys()}
}
