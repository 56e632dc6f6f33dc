// Package inputseal seals an approval's input at rest (approvals.
// seal_inputs): the input is encrypted with AES-256-GCM under a data key
// made for it alone, and the data key is stored wrapped (AES-256-GCM again)
// under a key-encryption key derived with HKDF-SHA-256 from a key of the
// server's ring. Deleting the wrapped data key makes the input unreadable
// for good, whoever holds the ring and the database: crypto-shredding.
//
// Both encryptions authenticate the binding (the tenant and the approval's
// id) as additional data, so that a sealed input or a wrapped key moved to
// another row does not open.
package inputseal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// dataKeySize is the size of a data key: AES-256.
const dataKeySize = 32

// kekInfo labels the key-encryption key HKDF derives from a ring key, so
// that it is never the key the ring uses for digests and cursors.
const kekInfo = "orangerail sealed input key-encryption key v1"

// ErrOpen is the failure to open a sealed input: the wrong ring key, a
// sealed input or wrapped key changed or moved, or the wrong binding.
var ErrOpen = errors.New("the sealed input does not open")

// Binding is the additional data a sealed input and its wrapped key are
// bound to: the tenant and the approval's id, each length-prefixed.
func Binding(tenant string, approvalID [16]byte) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(len(tenant)))
	b = append(b, tenant...)
	return append(b, approvalID[:]...)
}

// Seal encrypts plaintext under a fresh data key and returns the sealed
// input (nonce, then ciphertext and tag) and the data key wrapped under
// the key-encryption key derived from ringKey.
func Seal(ringKey, binding, plaintext []byte) (sealed, wrapped []byte, err error) {
	dataKey := make([]byte, dataKeySize)
	if _, err := rand.Read(dataKey); err != nil {
		return nil, nil, err
	}
	if sealed, err = encrypt(dataKey, binding, plaintext); err != nil {
		return nil, nil, err
	}
	kek, err := hkdf.Key(sha256.New, ringKey, nil, kekInfo, dataKeySize)
	if err != nil {
		return nil, nil, err
	}
	if wrapped, err = encrypt(kek, binding, dataKey); err != nil {
		return nil, nil, err
	}
	return sealed, wrapped, nil
}

// Open unwraps the data key with the key-encryption key derived from
// ringKey and decrypts the sealed input; ErrOpen when either does not
// authenticate.
func Open(ringKey, binding, sealed, wrapped []byte) ([]byte, error) {
	kek, err := hkdf.Key(sha256.New, ringKey, nil, kekInfo, dataKeySize)
	if err != nil {
		return nil, err
	}
	dataKey, err := decrypt(kek, binding, wrapped)
	if err != nil {
		return nil, err
	}
	return decrypt(dataKey, binding, sealed)
}

func encrypt(key, binding, plaintext []byte) ([]byte, error) {
	aead, err := gcm(key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return aead.Seal(nonce, nonce, plaintext, binding), nil
}

func decrypt(key, binding, sealed []byte) ([]byte, error) {
	aead, err := gcm(key)
	if err != nil {
		return nil, err
	}
	if len(sealed) < aead.NonceSize()+aead.Overhead() {
		return nil, ErrOpen
	}
	plaintext, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], binding)
	if err != nil {
		return nil, ErrOpen
	}
	return plaintext, nil
}

func gcm(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("inputseal: %w", err)
	}
	return cipher.NewGCM(block)
}
