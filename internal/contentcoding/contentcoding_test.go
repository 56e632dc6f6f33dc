package contentcoding_test

import (
	"net/http"
	"testing"

	"github.com/orangerail/orangerail/internal/contentcoding"
)

func TestOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		values []string
		want   string
	}{
		{nil, ""},
		{[]string{""}, ""},
		{[]string{"identity"}, ""},
		{[]string{" IDENTITY , "}, ""},
		{[]string{"gzip"}, "gzip"},
		{[]string{"identity, deflate"}, "deflate"},
		{[]string{"identity", "Br"}, "Br"},
		{[]string{",, x-custom ,gzip"}, "x-custom"},
	} {
		h := http.Header{}
		for _, v := range tc.values {
			h.Add("Content-Encoding", v)
		}
		if got := contentcoding.Of(h); got != tc.want {
			t.Errorf("Content-Encoding %q: %q, want %q", tc.values, got, tc.want)
		}
	}
}
