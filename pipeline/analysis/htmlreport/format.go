package htmlreport

import (
	"fmt"

	"github.com/forklab/forklab/pipeline/analysis/report"
)

// pct and pval format as the text report does.
var (
	pct  = report.Pct
	pval = report.PValue
)

// signed formats a count with its sign, as the report prints nets.
func signed(n int64) string { return fmt.Sprintf("%+d", n) }
