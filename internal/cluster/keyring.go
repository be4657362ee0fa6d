package cluster

import (
	"bytes"
	"errors"
	"fmt"
)

// ErrNoEncryption is returned by the keyring operations of a member
// started without gossip keys: its gossip is plaintext, and a key
// installed at run time would cut it off from the members it gossips
// with (as Serf refuses keyring operations without encryption).
var ErrNoEncryption = errors.New("gossip encryption is off on this member (started without a gossip key)")

// The keyring operations below change this member's keyring only
// (memberlist's keyring is local); coordinator.Keyring applies one to
// every member. They are serialized, name keys by Fingerprint in errors
// and logs, and rewrite Config.KeyFile, when set, after each change: an
// error saving it says the change was applied but not saved.

// Keys returns a copy of this member's keyring, the primary key first;
// nil when gossip is not encrypted.
func (c *Cluster) Keys() [][]byte {
	c.keyMu.Lock()
	defer c.keyMu.Unlock()
	return c.keysLocked()
}

func (c *Cluster) keysLocked() [][]byte {
	ring := c.mc.Keyring
	if ring == nil {
		return nil
	}
	var out [][]byte
	for _, k := range ring.GetKeys() {
		out = append(out, bytes.Clone(k))
	}
	return out
}

// InstallKey adds key (KeySize bytes) to the keyring for decryption;
// installing a key already there changes nothing. Errors:
// ErrNoEncryption, a key of the wrong size, the key file's.
func (c *Cluster) InstallKey(key []byte) error {
	return c.changeKeys("install", key, func() error { return c.mc.Keyring.AddKey(key) })
}

// UseKey makes key, which must be installed, the primary key: the one
// this member encrypts with. Errors: ErrNoEncryption, a key not
// installed, the key file's.
func (c *Cluster) UseKey(key []byte) error {
	return c.changeKeys("use", key, func() error { return c.mc.Keyring.UseKey(key) })
}

// RemoveKey removes key from the keyring; removing a key not there changes
// nothing. Errors: ErrNoEncryption, key is the primary key (refused, as
// memberlist does: make another key primary first), the key file's.
func (c *Cluster) RemoveKey(key []byte) error {
	return c.changeKeys("remove", key, func() error {
		if bytes.Equal(c.mc.Keyring.GetPrimaryKey(), key) {
			return errors.New("it is the primary key (use another key first)")
		}
		return c.mc.Keyring.RemoveKey(key)
	})
}

func (c *Cluster) changeKeys(op string, key []byte, change func() error) error {
	fp := Fingerprint(key)
	if len(key) != KeySize {
		return fmt.Errorf("%s gossip key: %d bytes, want %d", op, len(key), KeySize)
	}
	c.keyMu.Lock()
	defer c.keyMu.Unlock()
	if c.mc.Keyring == nil {
		return fmt.Errorf("%s gossip key %s: %w", op, fp, ErrNoEncryption)
	}
	before := c.keysLocked()
	if err := change(); err != nil {
		return fmt.Errorf("%s gossip key %s: %w", op, fp, err)
	}
	after := c.keysLocked()
	if equalKeys(before, after) {
		return nil
	}
	c.cfg.Logger.Info("gossip keyring changed", "op", op, "key", fp, "keys", len(after))
	if c.cfg.KeyFile != "" {
		if err := WriteKeyFile(c.cfg.KeyFile, after); err != nil {
			return fmt.Errorf("%s gossip key %s: applied, but not saved: %w", op, fp, err)
		}
	}
	return nil
}

func equalKeys(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
