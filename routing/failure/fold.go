package failure

// ASCII case-insensitive matching without allocating: every marker matched in provider
// messages and headers is ASCII (strings.EqualFold would also fold Unicode, and a lowered copy
// of the message would allocate on every classification).

// containsFold reports whether s contains sub, ASCII case-insensitively; sub is lower case.
func containsFold(s, sub string) bool { return indexFold(s, sub) >= 0 }

// hasPrefixFold reports whether s starts with prefix, ASCII case-insensitively.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && equalFold(s[:len(prefix)], prefix)
}

// hasSuffixFold reports whether s ends with suffix, ASCII case-insensitively.
func hasSuffixFold(s, suffix string) bool {
	return len(s) >= len(suffix) && equalFold(s[len(s)-len(suffix):], suffix)
}

// equalFold reports whether a and b are equal, ASCII case-insensitively.
func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

// lower lower-cases an ASCII letter.
func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}

// indexFold is strings.Index, ASCII case-insensitively; sub is lower case.
func indexFold(s, sub string) int {
	n := len(sub)
	if n == 0 {
		return 0
	}
	for i := 0; i+n <= len(s); i++ {
		if lower(s[i]) == sub[0] && equalFold(s[i:i+n], sub) {
			return i
		}
	}
	return -1
}
