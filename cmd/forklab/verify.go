package main

import (
	"fmt"
	"os"

	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/spf13/cobra"
)

func init() {
	var quick bool
	cmd := &cobra.Command{
		Use:   "verify DIR",
		Short: "Check a results directory against its manifest: every file's size, rows and checksum",
		Long: `verify checks that DIR holds exactly the sweep its manifest.json describes:
the manifest's own checksum (a hand edit shows), its row counts against its
files and seed range, and every table file — present, of its recorded size,
with its recorded CRC-32C and row count — and no Parquet file the manifest
does not list. report, sql, db and policy make the quick part of this check
(everything but reading the files) every time they open a directory.

Exit status 0: the directory matches; 4: it does not (the first difference
is named); 2: DIR is not a results directory.`,
		Example: `  forklab verify out
  forklab verify --quick out`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			m, err := sweep.ReadManifest(dir)
			if err != nil {
				return asInput(err)
			}
			if err := sweep.Verify(dir, m, !quick); err != nil {
				return err
			}
			var bytes int64
			for _, f := range m.Files {
				bytes += f.Bytes
			}
			how := "sizes, rows and checksums"
			if quick {
				how = "sizes"
			}
			fmt.Fprintf(os.Stdout, "%s matches its manifest: %d files, %d bytes, %d pairs (%s checked)\n", dir, len(m.Files), bytes, m.Rows["pairs"], how)
			return nil
		},
	}
	cmd.Flags().BoolVar(&quick, "quick", false, "check presence and sizes only, without reading the files")
	rootCmd.AddCommand(cmd)
}
