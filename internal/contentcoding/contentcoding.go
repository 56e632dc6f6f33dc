// Package contentcoding reads which content coding a message's body is
// sent in (its Content-Encoding), for the server's readers of request
// bodies and its reader of upstream answers, which decode none: a body
// in any coding but identity is not the bytes it would be read as.
package contentcoding

import (
	"net/http"
	"strings"
)

// Of returns the first coding h's Content-Encoding names other than
// identity, as sent (a peer's text: echo it with care), or "" when the
// body is sent as it is. The header may be repeated and each value a
// comma-separated list (RFC 9110, section 8.4); codings are matched
// without regard to case.
func Of(h http.Header) string {
	for _, v := range h.Values("Content-Encoding") {
		for enc := range strings.SplitSeq(v, ",") {
			if enc = strings.TrimSpace(enc); enc != "" && !strings.EqualFold(enc, "identity") {
				return enc
			}
		}
	}
	return ""
}
