// Package editdist finds the name a user probably meant: the edit distance
// behind every "did you mean" — a mistyped --root fixture, check ID,
// subcommand or expectations rule.
package editdist

// Distance is the Levenshtein distance of a and b over bytes, or limit+1
// when their lengths alone put it above limit (names longer than 255 bytes
// are never similar).
func Distance(a, b string, limit int) int {
	if len(a) > 255 || len(b) > 255 || abs(len(a)-len(b)) > limit {
		return limit + 1
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
