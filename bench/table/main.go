// Command table prints the rows benchmarks recorded (internal/support/benchtable)
// as one table: figure, baseline from the same run, ratio, target, result.
//
//	go run ./bench/table RESULTS-FILE
//
// It exits 1 when a figure misses its target, 2 when the file cannot be read.
package main

import (
	"fmt"
	"os"

	"github.com/hyperpod-governance/portal/internal/support/benchtable"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: table RESULTS-FILE")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	rows, err := benchtable.Read(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", os.Args[1], err)
		os.Exit(2)
	}
	if len(rows) == 0 {
		fmt.Fprintf(os.Stderr, "%s: no rows: did the benchmarks run?\n", os.Args[1])
		os.Exit(2)
	}
	failed, err := benchtable.Format(os.Stdout, rows)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Printf("\n%d figures, %d miss their target\n", len(rows), failed)
	if failed > 0 {
		os.Exit(1)
	}
}
