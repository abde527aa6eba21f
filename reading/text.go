package reading

import "strings"

// Text makes a string from the driver or /proc safe for every output, once
// where it enters: invalid UTF-8 becomes U+FFFD (one invalid label value
// makes Prometheus refuse the whole scrape), surrounding space is trimmed.
func Text(s string) string { return strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD")) }
