//go:build !go1.27 || fips140v1.0

package sshkeys

import "crypto"

func generateMLDSA(alg string) (crypto.Signer, error) { return nil, nil }

func isMLDSA(k crypto.Signer) bool { return false }
