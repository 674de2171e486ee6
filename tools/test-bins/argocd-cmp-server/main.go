// Command argocd-cmp-server is Argo CD's Config Management Plugin server as a
// stand-alone binary, for the project's tests (built by tools/test-bins/build.sh).
//
// Upstream ships every Argo CD component as one multi-call binary (cmd/main.go)
// that picks the command from argv[0]. This main does what that binary does for
// argocd-cmp-server (route klog through Argo's logrus logger, then run
// cmd/argocd-cmp-server/commands), so only the cmp-server closure is compiled.
// It adds a "version" subcommand, which upstream's command lacks.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	cmpserver "github.com/argoproj/argo-cd/v3/cmd/argocd-cmp-server/commands"
	"github.com/argoproj/argo-cd/v3/common"
	"github.com/argoproj/argo-cd/v3/util/log"
)

func main() {
	klog.SetLogger(log.NewLogrusLogger(log.NewWithCurrentConfig()))

	command := cmpserver.NewCommand()
	command.SilenceUsage = true
	command.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the version and exit",
		Args:  cobra.NoArgs,
		Run: func(*cobra.Command, []string) {
			fmt.Println(common.GetVersion().Version)
		},
	})
	if err := command.Execute(); err != nil {
		os.Exit(1)
	}
}
