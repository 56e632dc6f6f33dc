package ontology

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// BindSQL rewrites a statement's :name parameters to $1, $2 … and returns
// the names in the order of their numbers. A name used twice gets one
// number. Text in string literals, quoted identifiers, comments and
// dollar-quoted bodies is left alone, and so is a :: cast.
func BindSQL(sql string) (rewritten string, names []string, err error) {
	var b strings.Builder
	i := 0
	for i < len(sql) {
		c := sql[i]
		switch {
		case c == '\'' || c == '"':
			end, err := skipQuoted(sql, i, c, i > 0 && (sql[i-1] == 'E' || sql[i-1] == 'e') && c == '\'')
			if err != nil {
				return "", nil, err
			}
			b.WriteString(sql[i:end])
			i = end
		case strings.HasPrefix(sql[i:], "--"):
			end := strings.IndexByte(sql[i:], '\n')
			if end < 0 {
				end = len(sql) - i
			}
			b.WriteString(sql[i : i+end])
			i += end
		case strings.HasPrefix(sql[i:], "/*"):
			end, err := skipBlockComment(sql, i)
			if err != nil {
				return "", nil, err
			}
			b.WriteString(sql[i:end])
			i = end
		case c == '$' && dollarTag(sql[i:]) != "":
			tag := dollarTag(sql[i:])
			end := strings.Index(sql[i+len(tag):], tag)
			if end < 0 {
				return "", nil, fmt.Errorf("unterminated dollar-quoted string %s", tag)
			}
			end += i + 2*len(tag)
			b.WriteString(sql[i:end])
			i = end
		case c == ':' && i+1 < len(sql) && sql[i+1] == ':':
			b.WriteString("::")
			i += 2
		case c == ':' && i+1 < len(sql) && isIdentStart(sql[i+1]):
			j := i + 1
			for j < len(sql) && isIdentPart(sql[j]) {
				j++
			}
			name := sql[i+1 : j]
			n := slices.Index(names, name)
			if n < 0 {
				names = append(names, name)
				n = len(names) - 1
			}
			b.WriteString("$" + strconv.Itoa(n+1))
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), names, nil
}

// SQLParams lists a statement's :name parameters in order of first use.
func SQLParams(sql string) ([]string, error) {
	_, names, err := BindSQL(sql)
	return names, err
}

func skipQuoted(sql string, start int, quote byte, backslashEscapes bool) (int, error) {
	i := start + 1
	for i < len(sql) {
		switch {
		case backslashEscapes && sql[i] == '\\':
			i += 2
		case sql[i] == quote && i+1 < len(sql) && sql[i+1] == quote:
			i += 2
		case sql[i] == quote:
			return i + 1, nil
		default:
			i++
		}
	}
	return 0, fmt.Errorf("unterminated quoted text starting at byte %d", start)
}

func skipBlockComment(sql string, start int) (int, error) {
	depth, i := 0, start
	for i < len(sql) {
		switch {
		case strings.HasPrefix(sql[i:], "/*"):
			depth++
			i += 2
		case strings.HasPrefix(sql[i:], "*/"):
			depth--
			i += 2
			if depth == 0 {
				return i, nil
			}
		default:
			i++
		}
	}
	return 0, fmt.Errorf("unterminated comment starting at byte %d", start)
}

// dollarTag returns the $tag$ that opens a dollar-quoted string at the
// start of s, or "" (a $1 parameter is not one).
func dollarTag(s string) string {
	for j := 1; j < len(s); j++ {
		switch {
		case s[j] == '$':
			return s[:j+1]
		case !isIdentPart(s[j]) || (j == 1 && s[j] >= '0' && s[j] <= '9'):
			return ""
		}
	}
	return ""
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentPart(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }
