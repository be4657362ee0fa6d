package cluster

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// keyedMember starts a member on loopback with the given keys and label
// (empty: the defaults).
func keyedMember(t *testing.T, name, label string, keys ...[]byte) *Cluster {
	t.Helper()
	meta := &metaBox{m: &pb.NodeMeta{Role: pb.Role_ROLE_AGENT, Name: name, GrpcAddr: "127.0.0.1:1"}}
	c, err := New(Config{Name: name, BindAddr: "127.0.0.1:0", Meta: meta.get, Keys: keys, Label: label, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Leave(time.Second) })
	return c
}

func newKey(t *testing.T) []byte {
	t.Helper()
	k, err := ParseKey(GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// tryJoin joins c to addr for up to 1.5 s (Join retries each second) and
// returns the error.
func tryJoin(c *Cluster, addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err := c.Join(ctx, []string{addr})
	return err
}

// TestKeyRequiredToJoin: two members with the gossip key form a cluster; a
// member without the key, or with another key, cannot join it: its join
// fails, it sees no member but itself, and the keyed members never see
// it. Neither can a keyed member join a member without encryption.
func TestKeyRequiredToJoin(t *testing.T) {
	key := newKey(t)
	coord := keyedMember(t, "coord", "", key)
	agent := keyedMember(t, "agent", "", key)
	if err := tryJoin(agent, coord.Addr()); err != nil {
		t.Fatalf("keyed member: %v", err)
	}
	waitFor(t, "two keyed members", func() bool { return len(coord.Members()) == 2 && len(agent.Members()) == 2 })

	for _, rogue := range []*Cluster{keyedMember(t, "rogue-nokey", ""), keyedMember(t, "rogue-otherkey", "", newKey(t))} {
		name := rogue.cfg.Name
		if err := tryJoin(rogue, coord.Addr()); err == nil {
			t.Errorf("%s joined the keyed cluster", name)
		}
		if got := names(rogue.Members()); !slices.Equal(got, []string{name}) {
			t.Errorf("%s sees members %v, want only itself", name, got)
		}
	}
	// Were a rogue let in, gossip would carry it to both within a few
	// probe intervals (200 ms in local timings).
	time.Sleep(time.Second)
	for _, c := range []*Cluster{coord, agent} {
		if got := names(c.Members()); !slices.Equal(got, []string{"agent", "coord"}) {
			t.Errorf("%s sees members %v, want [agent coord]", c.cfg.Name, got)
		}
	}

	plain := keyedMember(t, "plain", "")
	if err := tryJoin(agent, plain.Addr()); err == nil {
		t.Error("a keyed member joined a member without encryption")
	}
	if got := names(plain.Members()); !slices.Equal(got, []string{"plain"}) {
		t.Errorf("plain member sees %v, want only itself", got)
	}
}

// TestLabelSeparatesClusters: members with the same key but different
// cluster labels never merge, in either direction; the same label merges.
func TestLabelSeparatesClusters(t *testing.T) {
	key := newKey(t)
	a := keyedMember(t, "a", "", key) // DefaultLabel
	b := keyedMember(t, "b", "staging", key)
	if a.Label() != DefaultLabel || b.Label() != "staging" {
		t.Errorf("labels %q, %q; want %q, staging", a.Label(), b.Label(), DefaultLabel)
	}
	if err := tryJoin(b, a.Addr()); err == nil {
		t.Error("member labelled staging joined the phalanx cluster")
	}
	if err := tryJoin(a, b.Addr()); err == nil {
		t.Error("member labelled phalanx joined the staging cluster")
	}
	if len(a.Members()) != 1 || len(b.Members()) != 1 {
		t.Errorf("members: a sees %v, b sees %v; want each only itself", names(a.Members()), names(b.Members()))
	}
	c := keyedMember(t, "c", "staging", key)
	if err := tryJoin(c, b.Addr()); err != nil {
		t.Fatalf("same label: %v", err)
	}
	waitFor(t, "b and c merged", func() bool { return len(b.Members()) == 2 })

	if _, err := New(Config{Name: "x", BindAddr: "127.0.0.1:0", Meta: func() *pb.NodeMeta { return nil }, Label: strings.Repeat("l", 256)}); err == nil || !strings.Contains(err.Error(), "cluster label") {
		t.Errorf("256-byte label: err = %v, want a cluster label error", err)
	}
}

// TestKeyringOps: install, use and remove on one member, the refusals
// (primary key, key not installed, no encryption), the key file rewritten
// after each change, and no key's text in any error.
func TestKeyringOps(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	file := filepath.Join(t.TempDir(), "gossip.keys")
	if err := WriteKeyFile(file, [][]byte{k1}); err != nil {
		t.Fatal(err)
	}
	meta := &metaBox{m: &pb.NodeMeta{Name: "m"}}
	c, err := New(Config{Name: "m", BindAddr: "127.0.0.1:0", Meta: meta.get, KeyFile: file, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Leave(time.Second) })
	fileKeys := func() [][]byte {
		t.Helper()
		kf, err := ReadKeyFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if kf.Loose() {
			t.Errorf("key file mode %v after rewrite, want 0600", kf.Mode)
		}
		return kf.Keys
	}
	noKeyText := func(err error, keys ...[]byte) {
		t.Helper()
		for _, k := range keys {
			if strings.Contains(err.Error(), EncodeKey(k)) {
				t.Errorf("error %q shows a key", err)
			}
		}
	}

	if err := c.UseKey(k2); err == nil {
		t.Error("UseKey of a key not installed succeeded")
	} else {
		noKeyText(err, k2)
	}
	if err := c.InstallKey(k2); err != nil {
		t.Fatal(err)
	}
	if got := fileKeys(); !equalKeys(got, [][]byte{k1, k2}) || !equalKeys(c.Keys(), got) {
		t.Errorf("after install: file %d keys, ring %d keys, want [k1 k2] in both", len(got), len(c.Keys()))
	}
	if err := c.RemoveKey(k1); err == nil || !strings.Contains(err.Error(), "primary") {
		t.Errorf("RemoveKey(primary) = %v, want refused as the primary key", err)
	} else {
		noKeyText(err, k1)
	}
	if err := c.UseKey(k2); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveKey(k1); err != nil {
		t.Fatal(err)
	}
	if got := fileKeys(); !equalKeys(got, [][]byte{k2}) || !equalKeys(c.Keys(), got) {
		t.Errorf("after use k2, remove k1: file %d keys, ring %d keys, want [k2] in both", len(got), len(c.Keys()))
	}
	if err := c.InstallKey(k1[:16]); err == nil {
		t.Error("InstallKey of a 16-byte key succeeded")
	}

	plain := keyedMember(t, "plain", "")
	for name, op := range map[string]func([]byte) error{"install": plain.InstallKey, "use": plain.UseKey, "remove": plain.RemoveKey} {
		if err := op(k1); !errors.Is(err, ErrNoEncryption) {
			t.Errorf("%s on a member without encryption: %v, want ErrNoEncryption", name, err)
		}
	}
	if plain.Keys() != nil {
		t.Errorf("Keys() of a member without encryption = %d keys, want nil", len(plain.Keys()))
	}
}

// TestReadKeyFile: the format (comments, blank lines, first key primary)
// and each malformed file's error, naming the file and the line.
func TestReadKeyFile(t *testing.T) {
	dir := t.TempDir()
	k1, k2 := GenerateKey(), GenerateKey()
	short := base64.StdEncoding.EncodeToString(make([]byte, 16))
	write := func(name, text string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "# primary first\n\n  "+k1+"  \n"+k2+"\n", 0o600)
	kf, err := ReadKeyFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if len(kf.Keys) != 2 || EncodeKey(kf.Keys[0]) != k1 || EncodeKey(kf.Keys[1]) != k2 || kf.Loose() {
		t.Errorf("ReadKeyFile(good) = %d keys, primary %v, loose %v; want 2, k1, false", len(kf.Keys), EncodeKey(kf.Keys[0]) == k1, kf.Loose())
	}
	if kf, err := ReadKeyFile(write("loose", k1+"\n", 0o644)); err != nil || !kf.Loose() {
		t.Errorf("ReadKeyFile(0644 file) = loose %v, %v; want loose", kf != nil && kf.Loose(), err)
	}

	for _, tc := range []struct {
		name, text, want string
	}{
		{"short", k1 + "\n" + short + "\n", "short: line 2: gossip key is 16 bytes, want 32"},
		{"badbase64", "# c\n" + k1[:40] + "!!!!\n", "badbase64: line 2: gossip key is not valid base64"},
		{"empty", "# nothing\n\n", "empty: no key"},
		{"twice", k1 + "\n" + k2 + "\n" + k1 + "\n", "twice: line 3: the key of line 1 again"},
	} {
		p := write(tc.name, tc.text, 0o600)
		_, err := ReadKeyFile(p)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("ReadKeyFile(%s) = %v, want an error naming %s and %q", tc.name, err, p, tc.want)
			continue
		}
		if strings.Contains(err.Error(), k1) || strings.Contains(err.Error(), k1[:40]) {
			t.Errorf("ReadKeyFile(%s) error shows a key: %v", tc.name, err)
		}
	}
	if _, err := ReadKeyFile(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "gossip key file") {
		t.Errorf("ReadKeyFile(missing) = %v, want a gossip key file error", err)
	}
}
