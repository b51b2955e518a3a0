package floattext

import (
	"bufio"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Every literal of testdata/literals.txt: held exactly as strconv reads
// it, or refused with ErrNotFloat64 (NaN, ±Inf, overflow, a non-zero
// literal that underflows to 0), or a syntax error.
func TestParse(t *testing.T) {
	f, err := os.Open("testdata/literals.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		lit, want, _ := strings.Cut(line, "\t")
		n++
		got, err := Parse(lit)
		switch want {
		case "refused":
			if !errors.Is(err, ErrNotFloat64) || !strings.Contains(err.Error(), strings.TrimSpace(lit)) {
				t.Errorf("Parse(%q) = %v, %v; want refused naming it", lit, got, err)
			}
		case "syntax":
			if err == nil || errors.Is(err, ErrNotFloat64) {
				t.Errorf("Parse(%q) = %v, %v; want a syntax error", lit, got, err)
			}
		default:
			w, _ := strconv.ParseFloat(want, 64)
			if err != nil || got != w {
				t.Errorf("Parse(%q) = %v, %v; want %v", lit, got, err, w)
			}
		}
	}
	if n < 20 {
		t.Fatalf("read %d literals", n)
	}
	if _, err := Parse("1e-400"); err == nil || err.Error() != "1e-400 is too small for a float64: it would read as 0 (cannot be held by a float64)" {
		t.Errorf("wording: %v", err)
	}
}
