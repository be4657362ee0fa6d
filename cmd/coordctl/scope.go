package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The global flags --coordinator and --tls-* reach the coordinator: only
// the commands that call it (agents, run, keyring) use them. The others
// (demo, target, tls, keygen) neither show them in their help nor accept
// them, so that a user never believes `demo --coordinator X` used X.

// offline marks cmd and its subcommands as not using the coordinator.
func offline(cmd *cobra.Command) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[offlineAnnotation] = "true"
	return cmd
}

const offlineAnnotation = "phalanx-offline"

// isOffline reports whether cmd or one of its parents is marked offline.
func isOffline(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if c.Annotations[offlineAnnotation] == "true" {
			return true
		}
	}
	return false
}

// scopeClusterFlags installs, on root, the help and the check of the
// cluster flags named: hidden in the help of offline commands, refused on
// their command line.
func scopeClusterFlags(root *cobra.Command, names []string) {
	defaultHelp := root.HelpFunc()
	root.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		if isOffline(cmd) {
			for _, f := range clusterFlags(root, names) {
				f.Hidden = true
				defer func() { f.Hidden = false }()
			}
		}
		defaultHelp(cmd, args)
	})
}

// checkClusterFlags refuses a cluster flag given to an offline command.
func checkClusterFlags(root, cmd *cobra.Command, names []string) error {
	if !isOffline(cmd) {
		return nil
	}
	for _, f := range clusterFlags(root, names) {
		if f.Changed {
			return &usageError{fmt.Errorf("--%s: %s does not use the coordinator (it is for agents, run and keyring)", f.Name, cmd.CommandPath())}
		}
	}
	return nil
}

func clusterFlags(root *cobra.Command, names []string) []*pflag.Flag {
	var fs []*pflag.Flag
	for _, n := range names {
		if f := root.PersistentFlags().Lookup(n); f != nil {
			fs = append(fs, f)
		}
	}
	return fs
}
