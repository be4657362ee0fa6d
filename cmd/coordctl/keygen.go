package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/phalanxload/phalanx/internal/cluster"
)

// newKeygenCmd is `coordctl keygen`, as `consul keygen`: a new random
// gossip key (32 bytes, AES-256, base64) on stdout, or in a new key file
// (mode 0600) with --out.
func newKeygenCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "Make a gossip encryption key (base64 AES-256) for --gossip-key-file and coordctl keyring",
		Long: "keygen prints a new random gossip key: 32 bytes (AES-256), base64, as consul keygen does.\n" +
			"With --out FILE it writes a new key file instead (mode 0600; an existing file is never overwritten),\n" +
			"ready for agent and coordinator --gossip-key-file: every member of a cluster needs the same key.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			key := cluster.GenerateKey()
			if out == "" {
				fmt.Fprintln(cmd.OutOrStdout(), key)
				return nil
			}
			if err := writeNewKeyFile(out, key); err != nil {
				return err
			}
			// As coordctl tls says what it wrote; never the key itself.
			fmt.Fprintf(cmd.OutOrStdout(), "==> wrote %s (gossip key file, mode 0600: copy it to every member, as --gossip-key-file)\n", out)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "write a new gossip key file FILE (mode 0600) instead of printing the key")
	return cmd
}

// writeNewKeyFile creates the key file path, which must not exist,
// holding key.
func writeNewKeyFile(path, key string) error {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("keygen --out %s: the file exists; not overwritten (rotate keys with coordctl keyring)", path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("keygen --out: %w", err)
	}
	k, err := cluster.ParseKey(key)
	if err != nil {
		return err
	}
	if err := cluster.WriteKeyFile(path, [][]byte{k}); err != nil {
		return fmt.Errorf("keygen --out: %w", err)
	}
	return nil
}
