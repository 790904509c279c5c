package demo

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

// ParseFlags parses args with fs and rejects an argument left over after
// the flags: every setting of a demo is a flag.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (all settings are flags; see -help)", fs.Arg(0))
	}
	return nil
}

// ExitOnFlagError ends the program if err, from parsing its flags, is not
// nil: with status 0 for -help (the flag set has printed the usage), else
// with status 2 after printing "prog: err" to standard error.
func ExitOnFlagError(prog string, err error) {
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, prog+":", err)
		os.Exit(2)
	}
}

// ExitOnError ends the program with status 1 if err is not nil, after
// printing "prog: err" to standard error.
func ExitOnError(prog string, err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, prog+":", err)
		os.Exit(1)
	}
}

// PrintProblems prints each of problems, the checks a run failed, to
// standard error after prefix (such as "prog: FAIL:"), one a line, and
// reports whether there were any: the program then exits with status 1.
func PrintProblems(prefix string, problems []string) bool {
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, prefix, p)
	}
	return len(problems) > 0
}
