//go:build go1.27 && !fips140v1.0

package sshkeys

import (
	"crypto"
	"crypto/mldsa"

	"golang.org/x/crypto/ssh"
)

func generateMLDSA(alg string) (crypto.Signer, error) {
	switch alg {
	case ssh.KeyAlgoMLDSA44:
		return mldsa.GenerateKey(mldsa.MLDSA44())
	case ssh.KeyAlgoMLDSA65:
		return mldsa.GenerateKey(mldsa.MLDSA65())
	case ssh.KeyAlgoMLDSA87:
		return mldsa.GenerateKey(mldsa.MLDSA87())
	}
	return nil, nil
}

func isMLDSA(k crypto.Signer) bool {
	_, ok := k.(*mldsa.PrivateKey)
	return ok
}
