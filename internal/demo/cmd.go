package demo

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
)

// NewFlagSet returns the flag set of the demo prog: it goes on after an
// error (ParseFlags returns it) and writes its messages to errOut. If about
// is not "", -help prints "usage: prog [flags]", a blank line, about and
// another blank line before the flags' defaults.
func NewFlagSet(prog string, errOut io.Writer, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.SetOutput(errOut)
	if about != "" {
		fs.Usage = func() {
			fmt.Fprint(fs.Output(), "usage: "+prog+" [flags]\n\n"+about+"\n\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

// PickSeed returns seed, or a random odd one (never 0) if seed is 0: a
// demo's -seed 0 picks one, which every part of the run then shares.
func PickSeed(seed uint64) uint64 {
	if seed == 0 {
		return rand.Uint64() | 1
	}
	return seed
}

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
