package main

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A text (the README) marks what it quotes from the page by putting it
// between these two comments, inline or around whole lines or tables:
//
//	<!-- benchmarks.md -->| arm + Stop | 145 ns ±2% | 447.7 ns ±3% | 3.09x (p=0.002) |<!-- /benchmarks.md -->
//
// Every number in a quoted span must appear, as written, on the page.
const (
	quoteOpen  = "<!-- benchmarks.md -->"
	quoteClose = "<!-- /benchmarks.md -->"
)

// number matches a number as the page writes them: 447.7, 10,000, 3.09x,
// 3%. A trailing x or % is part of it, so "3.2" in a text does not match
// "3.2x" on the page, nor "3.2" "3.23".
var number = regexp.MustCompile(`\d+(?:[.,]\d+)*(?:x\b|%)?`)

// numbers returns the numbers in s with their byte offsets, leaving out
// digits that are part of a word (go1.26, p99, v0).
func numbers(s string) (nums []string, at []int) {
	for _, m := range number.FindAllStringIndex(s, -1) {
		if m[0] > 0 {
			r, _ := utf8.DecodeLastRuneInString(s[:m[0]])
			if unicode.IsLetter(r) || r == '_' || r == '.' {
				continue
			}
		}
		nums = append(nums, s[m[0]:m[1]])
		at = append(at, m[0])
	}
	return nums, at
}

// A quote is a number the text quotes from the page, and its line.
type quote struct {
	num  string
	line int
}

// quotes returns every number between quoteOpen and quoteClose in text.
func quotes(text string) ([]quote, error) {
	var out []quote
	rest, off := text, 0
	for {
		i := strings.Index(rest, quoteOpen)
		if j := strings.Index(rest, quoteClose); j >= 0 && (i < 0 || j < i) {
			return nil, fmt.Errorf("line %d: %s without %s before it", 1+strings.Count(text[:off+j], "\n"), quoteClose, quoteOpen)
		}
		if i < 0 {
			return out, nil
		}
		start := i + len(quoteOpen)
		j := strings.Index(rest[start:], quoteClose)
		if j < 0 {
			return nil, fmt.Errorf("line %d: %s without %s after it", 1+strings.Count(text[:off+i], "\n"), quoteOpen, quoteClose)
		}
		span := rest[start : start+j]
		if k := strings.Index(span, quoteOpen); k >= 0 {
			return nil, fmt.Errorf("line %d: %s inside a quote", 1+strings.Count(text[:off+start+k], "\n"), quoteOpen)
		}
		nums, at := numbers(span)
		for n, num := range nums {
			out = append(out, quote{num, 1 + strings.Count(text[:off+start+at[n]], "\n")})
		}
		adv := start + j + len(quoteClose)
		rest, off = rest[adv:], off+adv
	}
}

// check returns, for each number text quotes that page does not have, a
// line saying so; and an error if text quotes nothing at all.
func check(text, page string) ([]string, error) {
	qs, err := quotes(text)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(text, quoteOpen) {
		return nil, errors.New("it marks nothing as quoted from the page (" + quoteOpen + " … " + quoteClose + ")")
	}
	nums, _ := numbers(page)
	on := map[string]bool{}
	for _, n := range nums {
		on[n] = true
	}
	var missing []string
	for _, q := range qs {
		if !on[q.num] {
			missing = append(missing, fmt.Sprintf("line %d: %s is not on the page", q.line, q.num))
		}
	}
	return missing, nil
}

// checkFiles checks the text file against the page file.
func checkFiles(textPath, pagePath string) error {
	text, err := os.ReadFile(textPath)
	if err != nil {
		return err
	}
	page, err := os.ReadFile(pagePath)
	if err != nil {
		return err
	}
	missing, err := check(string(text), string(page))
	if err != nil {
		return fmt.Errorf("%s: %v", textPath, err)
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s quotes numbers that %s does not have:\n%s", textPath, pagePath, strings.Join(missing, "\n"))
	}
	return nil
}
