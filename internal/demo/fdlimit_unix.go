//go:build unix

package demo

import "syscall"

// RaiseFileLimit tries to make RLIMIT_NOFILE at least need, raising the hard
// limit too if the process may (root with CAP_SYS_RESOURCE). It returns the
// soft limit now in force and, if that is still short, why it could not be
// raised.
func RaiseFileLimit(need uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur >= need {
		return lim.Cur, nil
	}
	want := lim
	want.Cur = need
	want.Max = max(lim.Max, need)
	err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want)
	if err == nil {
		return need, nil
	}
	// Go already raises the soft limit to the hard one at startup, but make
	// sure: the hard limit is as far as an unprivileged process can go.
	if lim.Cur < lim.Max {
		soft := lim
		soft.Cur = lim.Max
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &soft) == nil {
			lim = soft
		}
	}
	return lim.Cur, err
}
