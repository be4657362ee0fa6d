package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/phalanxload/phalanx/coordinator"
	"github.com/phalanxload/phalanx/internal/cluster"
	pb "github.com/phalanxload/phalanx/proto/phalanx/v1"
)

// newKeyringCmd is `coordctl keyring list|install|use|remove`, the
// gossip key rotation of `consul keyring` (-list, -install, -use,
// -remove): the coordinator applies each to every live member.
func newKeyringCmd(co *coordinatorFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keyring",
		Short: "List or rotate the cluster's gossip keys (install, use, remove) on every live member",
		Long: "keyring changes the gossip keyring of every live member (the coordinator and each agent),\n" +
			"as consul keyring does. Rotate a key without downtime:\n\n" +
			"  coordctl keyring install NEW   # every member can decrypt with NEW\n" +
			"  coordctl keyring use NEW       # every member encrypts with NEW (refused unless all have it)\n" +
			"  coordctl keyring remove OLD    # OLD is gone (refused while any member uses it)\n\n" +
			"KEY is base64 (coordctl keygen), or - to read it from stdin (keeps it out of shell history).\n" +
			"Each member rewrites its --gossip-key-file, so a restart keeps the new keyring.\n" +
			"Exit status 1 when any member did not apply the operation; its name and reason are printed.",
		// An argument that is no operation may be a key: it is refused
		// without being echoed, as cobra's unknown-command error would.
		Args: cobra.ArbitraryArgs,
		RunE: func(*cobra.Command, []string) error {
			return &usageError{errors.New("keyring: want list, install KEY, use KEY or remove KEY (see coordctl keyring --help; an argument given is not shown, it may be a key)")}
		},
	}
	cmd.AddCommand(
		&cobra.Command{
			Use:   "list",
			Short: "List the gossip keys and how many members hold each (and use it as primary)",
			Args: func(_ *cobra.Command, args []string) error {
				if len(args) > 0 {
					return &usageError{errors.New("keyring list takes no argument (not shown: it may be a key)")}
				}
				return nil
			},
			RunE: func(cmd *cobra.Command, _ []string) error {
				return keyringOp(cmd, co, pb.KeyringOp_KEYRING_OP_LIST, nil)
			},
		},
		keyCmd(co, "install", "Install a gossip key on every member, for decryption", pb.KeyringOp_KEYRING_OP_INSTALL),
		keyCmd(co, "use", "Make an installed gossip key every member's primary (the one it encrypts with)", pb.KeyringOp_KEYRING_OP_USE),
		keyCmd(co, "remove", "Remove a gossip key that no member uses as primary from every member", pb.KeyringOp_KEYRING_OP_REMOVE),
	)
	return cmd
}

func keyCmd(co *coordinatorFlags, use, short string, op pb.KeyringOp) *cobra.Command {
	return &cobra.Command{
		Use:   use + " KEY|-",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			text := args[0]
			if text == "-" {
				line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
				if err != nil && !errors.Is(err, io.EOF) {
					return fmt.Errorf("keyring %s: read key from stdin: %w", use, err)
				}
				text = line
			}
			key, err := cluster.ParseKey(text)
			if err != nil {
				return &usageError{fmt.Errorf("keyring %s: %w", use, err)}
			}
			return keyringOp(cmd, co, op, key)
		},
	}
}

// keyringOp runs op on the coordinator and prints the outcome: for list
// the keys (as consul keyring -list shows them) and for the others each
// member's result; the members that failed go to stderr, and make the
// command fail naming them.
func keyringOp(cmd *cobra.Command, co *coordinatorFlags, op pb.KeyringOp, key []byte) error {
	name := strings.ToLower(strings.TrimPrefix(op.String(), "KEYRING_OP_"))
	client, closeConn, err := co.dial()
	addr := co.addr
	if err != nil {
		return err
	}
	defer closeConn()
	// Two rounds (the check before use and remove, then the operation),
	// each bounded per member by the coordinator.
	ctx, cancel := context.WithTimeout(cmd.Context(), 2*coordinator.KeyringCallTimeout+5*time.Second)
	defer cancel()
	resp, err := client.Keyring(ctx, &pb.KeyringRequest{Op: op, Key: key})
	if err != nil {
		return &prefixedError{"keyring " + name + " on coordinator " + addr, err}
	}
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	total := len(resp.GetMembers())
	var failed []string
	for _, m := range resp.GetMembers() {
		if m.GetError() != "" {
			failed = append(failed, m.GetName())
		}
	}
	answered := total - len(failed)
	if op == pb.KeyringOp_KEYRING_OP_LIST {
		fmt.Fprintln(w, "KEY\tFINGERPRINT\tMEMBERS\tPRIMARY")
		for _, k := range resp.GetKeys() {
			fmt.Fprintf(w, "%s\t%s\t%d/%d\t%d\n", cluster.EncodeKey(k.GetKey()), cluster.Fingerprint(k.GetKey()), k.GetMembers(), answered, k.GetPrimary())
		}
	} else {
		fmt.Fprintln(w, "MEMBER\tROLE\tRESULT")
		for _, m := range resp.GetMembers() {
			result := "ok"
			if m.GetError() != "" {
				result = "FAILED"
			}
			role := strings.ToLower(strings.TrimPrefix(m.GetRole().String(), "ROLE_"))
			fmt.Fprintf(w, "%s\t%s\t%s\n", m.GetName(), role, result)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, m := range resp.GetMembers() {
		if m.GetError() != "" {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s\n", m.GetName(), m.GetError())
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("keyring %s: %d of %d members did not answer or apply it: %s", name, len(failed), total, strings.Join(failed, ", "))
	}
	if op != pb.KeyringOp_KEYRING_OP_LIST {
		fmt.Fprintf(cmd.ErrOrStderr(), "keyring %s %s: applied on all %d members\n", name, cluster.Fingerprint(key), total)
	}
	return nil
}
