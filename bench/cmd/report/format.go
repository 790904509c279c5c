package main

import (
	"fmt"
	"math"
	"strconv"
)

// num formats a median for a table: no exponents, about 3 significant digits.
func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case v == 0:
		return "0"
	case math.Abs(v) >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case math.Abs(v) >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		// three significant digits, without an exponent
		return strconv.FormatFloat(v, 'f', 2-int(math.Floor(math.Log10(math.Abs(v)))), 64)
	}
}

// times formats a ratio.
func times(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "—"
	}
	switch {
	case r >= 10:
		return fmt.Sprintf("%.0fx", r)
	case r >= 0.1 || r == 0:
		return fmt.Sprintf("%.2fx", r)
	default: // two significant digits
		return strconv.FormatFloat(r, 'f', 1-int(math.Floor(math.Log10(r))), 64) + "x"
	}
}
