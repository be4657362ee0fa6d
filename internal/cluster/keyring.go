package cluster

import (
	"bytes"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// ErrNoEncryption is returned by the keyring operations of a member
// started without gossip keys: its gossip is plaintext, and a key
// installed at run time would cut it off from the members it gossips
// with (as Serf refuses keyring operations without encryption).
var ErrNoEncryption = errors.New("gossip encryption is off on this member (started without a gossip key)")

// Errors of the keyring operations, wrapped with the operation and the
// key's fingerprint.
var (
	// ErrKeySize: the key is not KeySize bytes.
	ErrKeySize = fmt.Errorf("a gossip key is %d bytes (AES-256)", KeySize)
	// ErrNotInstalled: UseKey of a key not in the keyring.
	ErrNotInstalled = errors.New("the key is not installed (install it first)")
	// ErrPrimaryKey: RemoveKey of the primary key.
	ErrPrimaryKey = errors.New("it is the primary key (use another key first)")
	// ErrNotSaved: the change was applied but Config.KeyFile could not be
	// rewritten.
	ErrNotSaved = errors.New("applied, but the key file was not rewritten")
)

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
	return c.changeKeys("use", key, func() error {
		for _, k := range c.mc.Keyring.GetKeys() {
			if bytes.Equal(k, key) {
				return c.mc.Keyring.UseKey(key)
			}
		}
		return ErrNotInstalled
	})
}

// RemoveKey removes key from the keyring; removing a key not there changes
// nothing. Errors: ErrNoEncryption, key is the primary key (refused, as
// memberlist does: make another key primary first), the key file's.
func (c *Cluster) RemoveKey(key []byte) error {
	return c.changeKeys("remove", key, func() error {
		if bytes.Equal(c.mc.Keyring.GetPrimaryKey(), key) {
			return ErrPrimaryKey
		}
		return c.mc.Keyring.RemoveKey(key)
	})
}

func (c *Cluster) changeKeys(op string, key []byte, change func() error) error {
	fp := Fingerprint(key)
	if len(key) != KeySize {
		return fmt.Errorf("%s gossip key: %w, not %d", op, ErrKeySize, len(key))
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
			return fmt.Errorf("%s gossip key %s: %w: %w", op, fp, ErrNotSaved, err)
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

// Keyring applies one keyring operation for the AgentService and
// CoordinatorService RPCs and returns the keyring after it, the primary
// first. Its errors are gRPC status errors: InvalidArgument for an unknown
// op or a key of the wrong size; FailedPrecondition for ErrNoEncryption,
// ErrNotInstalled and ErrPrimaryKey; Internal for ErrNotSaved.
func (c *Cluster) Keyring(op pb.KeyringOp, key []byte) ([][]byte, error) {
	var err error
	switch op {
	case pb.KeyringOp_KEYRING_OP_LIST:
		if c.mc.Keyring == nil {
			err = fmt.Errorf("list gossip keys: %w", ErrNoEncryption)
		}
	case pb.KeyringOp_KEYRING_OP_INSTALL:
		err = c.InstallKey(key)
	case pb.KeyringOp_KEYRING_OP_USE:
		err = c.UseKey(key)
	case pb.KeyringOp_KEYRING_OP_REMOVE:
		err = c.RemoveKey(key)
	default:
		return nil, status.Errorf(codes.InvalidArgument, "keyring op %v: want list, install, use or remove", op)
	}
	if err != nil {
		return nil, status.Error(keyringCode(err), err.Error())
	}
	return c.Keys(), nil
}

func keyringCode(err error) codes.Code {
	switch {
	case errors.Is(err, ErrKeySize):
		return codes.InvalidArgument
	case errors.Is(err, ErrNoEncryption), errors.Is(err, ErrNotInstalled), errors.Is(err, ErrPrimaryKey):
		return codes.FailedPrecondition
	case errors.Is(err, ErrNotSaved):
		return codes.Internal
	}
	return codes.Unknown
}
