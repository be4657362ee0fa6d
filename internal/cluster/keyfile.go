package cluster

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// KeySize is the size of a gossip encryption key in bytes: 32, AES-256 in
// GCM mode (memberlist's keyring also takes 16 and 24; Phalanx takes only
// 32, the size `consul keygen` makes).
const KeySize = 32

// GenerateKey returns a new random gossip key (KeySize bytes from
// crypto/rand) in the text form key files and coordctl use: standard base64
// with padding, 44 characters, as `consul keygen` prints it.
func GenerateKey() string {
	key := make([]byte, KeySize)
	rand.Read(key) // never fails (crypto/rand, Go 1.24+)
	return base64.StdEncoding.EncodeToString(key)
}

// EncodeKey returns key's text form: standard base64 with padding.
func EncodeKey(key []byte) string { return base64.StdEncoding.EncodeToString(key) }

// ParseKey decodes a gossip key from its text form (standard base64, as
// GenerateKey makes; surrounding spaces are ignored). Errors say what is
// wrong and never repeat the text: it may be a key.
func ParseKey(s string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, errors.New("gossip key is not valid base64 (make one with coordctl keygen)")
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("gossip key is %d bytes, want %d (AES-256; make one with coordctl keygen)", len(key), KeySize)
	}
	return key, nil
}

// Fingerprint names a key without revealing it, for logs and errors:
// "sha256:" and the first 8 bytes of the key's SHA-256 in hex.
func Fingerprint(key []byte) string {
	sum := sha256.Sum256(key)
	return "sha256:" + hex.EncodeToString(sum[:8])
}

// A gossip key file holds one key per line in the text form of
// GenerateKey; the first key is the primary (it encrypts what this member
// sends), the others are only tried when decrypting, for rotation. Blank
// lines and lines whose first non-space character is '#' are ignored. A
// member rewrites its key file after each keyring change (primary first,
// comments dropped), as Serf rewrites its keyring file. The file should be
// readable by its owner only (0600): ReadKeyFile reports a looser mode.

// KeyFile is a gossip key file as read.
type KeyFile struct {
	// Path is the file's name, as given.
	Path string
	// Keys are the keys in file order, each KeySize bytes; Keys[0] is the
	// primary. Never empty.
	Keys [][]byte
	// Mode is the file's permission bits.
	Mode fs.FileMode
}

// Loose reports whether the file is readable or writable by its group or
// by others (any of mode 0077).
func (f *KeyFile) Loose() bool { return f.Mode&0o077 != 0 }

// ReadKeyFile reads a gossip key file (format above). Errors name the file
// and, for a bad key, its line (never the key's text); a file with no key,
// or with a key twice, is an error.
func ReadKeyFile(path string) (*KeyFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gossip key file: %w", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("gossip key file: %w", err)
	}
	kf := &KeyFile{Path: path, Mode: st.Mode().Perm()}
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, err := ParseKey(line)
		if err != nil {
			return nil, fmt.Errorf("gossip key file %s: line %d: %w", path, n, err)
		}
		if first, dup := seen[string(key)]; dup {
			return nil, fmt.Errorf("gossip key file %s: line %d: the key of line %d again", path, n, first)
		}
		seen[string(key)] = n
		kf.Keys = append(kf.Keys, key)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("gossip key file %s: %w", path, err)
	}
	if len(kf.Keys) == 0 {
		return nil, fmt.Errorf("gossip key file %s: no key (one base64 key per line; make one with coordctl keygen)", path)
	}
	return kf, nil
}

// WriteKeyFile writes keys (primary first) to path in the key file format,
// mode 0600, replacing any file there atomically (a temporary file in the
// same directory, then rename).
func WriteKeyFile(path string, keys [][]byte) error {
	var b strings.Builder
	b.WriteString("# Phalanx gossip keys (base64, AES-256), one per line; the first is the primary.\n")
	for _, k := range keys {
		b.WriteString(EncodeKey(k))
		b.WriteByte('\n')
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write gossip key file: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write gossip key file %s: %w", path, err)
	}
	if _, err := tmp.WriteString(b.String()); err != nil {
		tmp.Close()
		return fmt.Errorf("write gossip key file %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write gossip key file %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write gossip key file %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write gossip key file %s: %w", path, err)
	}
	return nil
}
