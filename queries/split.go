package queries

import "strings"

// Split splits SQL text into its statements at the semicolons
// that end them, the way DuckDB's parser does: semicolons inside string
// literals ('…', E'…' with backslash escapes), quoted identifiers ("…"),
// dollar-quoted strings ($$…$$, $tag$…$tag$), line comments (-- …) and
// block comments (/* … */, which nest) do not split. Each statement keeps
// its own text, leading comments included, without the terminating
// semicolon; statements that hold only white space and comments are
// dropped. Unterminated quotes or comments run to the end of the text
// (DuckDB reports the syntax error when the statement runs).
func Split(text string) []string {
	var out []string
	start := 0
	emit := func(end int) {
		if s := text[start:end]; !Blank(s) {
			out = append(out, s)
		}
	}
	// ident: the byte before i belongs to an identifier (or a number),
	// where DuckDB's lexer takes a $ as part of the name (a$$x$ is one
	// identifier), not as the start of a $tag$ string.
	ident := false
	for i := 0; i < len(text); {
		c := text[i]
		if c == '$' && ident {
			i++
			continue
		}
		ident = false
		switch {
		case c == ';':
			emit(i)
			i++
			start = i
		case c == '\'':
			escapes := i > 0 && (text[i-1] == 'E' || text[i-1] == 'e') && (i == 1 || !isIdent(text[i-2]))
			i = skipQuoted(text, i, '\'', escapes)
		case c == '"':
			i = skipQuoted(text, i, '"', false)
		case c == '-' && strings.HasPrefix(text[i:], "--"):
			if j := strings.IndexByte(text[i:], '\n'); j >= 0 {
				i += j + 1
			} else {
				i = len(text)
			}
		case c == '/' && strings.HasPrefix(text[i:], "/*"):
			i = skipBlockComment(text, i)
		case c == '$':
			i = skipDollar(text, i)
		default:
			ident = isIdent(c)
			i++
		}
	}
	emit(len(text))
	return out
}

// skipQuoted returns the index just past the quoted run starting at i;
// a doubled quote is an escaped quote, and with escapes a backslash escapes
// the next byte.
func skipQuoted(text string, i int, q byte, escapes bool) int {
	for j := i + 1; j < len(text); j++ {
		switch {
		case escapes && text[j] == '\\':
			j++
		case text[j] == q:
			if j+1 < len(text) && text[j+1] == q {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(text)
}

func skipBlockComment(text string, i int) int {
	depth := 0
	for j := i; j < len(text)-1; j++ {
		switch text[j : j+2] {
		case "/*":
			depth++
			j++
		case "*/":
			depth--
			j++
			if depth == 0 {
				return j + 1
			}
		}
	}
	return len(text)
}

// skipDollar skips a dollar-quoted string $tag$…$tag$ starting at i; a $
// that does not open one (a positional parameter such as $1) is one byte.
func skipDollar(text string, i int) int {
	j := i + 1
	for j < len(text) && isIdent(text[j]) && !(j == i+1 && text[j] >= '0' && text[j] <= '9') {
		j++
	}
	if j >= len(text) || text[j] != '$' {
		return i + 1
	}
	tag := text[i : j+1]
	if k := strings.Index(text[j+1:], tag); k >= 0 {
		return j + 1 + k + len(tag)
	}
	return len(text)
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// blank reports text that holds only white space and comments.
func Blank(s string) bool {
	for i := 0; i < len(s); {
		switch {
		case s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r' || s[i] == '\f':
			i++
		case strings.HasPrefix(s[i:], "--"):
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				return true
			}
			i += j + 1
		case strings.HasPrefix(s[i:], "/*"):
			i = skipBlockComment(s, i)
		default:
			return false
		}
	}
	return true
}
