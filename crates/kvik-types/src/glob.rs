//! Redis glob-style pattern matching (`stringmatchlen`: KEYS, SCAN MATCH, CONFIG GET, CLIENT
//! KILL, FUNCTION LIST LIBRARYNAME ...), with Redis's rules: `*`, `?`, `[abc]`, `[^a]`, `[a-z]`,
//! and `\` escaping, on bytes; case-sensitive or not.

/// True if `s` matches `pattern`, case-sensitively.
pub fn matches(pattern: &[u8], s: &[u8]) -> bool {
    matches_with(pattern, s, false)
}

/// True if `s` matches `pattern`, ignoring ASCII case (Redis's `nocase`).
pub fn matches_nocase(pattern: &[u8], s: &[u8]) -> bool {
    matches_with(pattern, s, true)
}

fn same(a: u8, b: u8, nocase: bool) -> bool {
    a == b || (nocase && a.eq_ignore_ascii_case(&b))
}

/// Iterative with one backtrack point for `*`, so hostile patterns such as `*a*a*a*a*b` cost
/// O(len(pattern) * len(s)), never exponential time.
fn matches_with(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    let (mut p, mut i) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    star = Some((p, i));
                    continue;
                }
                b'?' => {
                    p += 1;
                    i += 1;
                    continue;
                }
                b'[' => {
                    if let Some((matched, next)) = class(pattern, p, s[i], nocase) {
                        if matched {
                            p = next;
                            i += 1;
                            continue;
                        }
                    }
                }
                b'\\' if p + 1 < pattern.len() => {
                    if same(pattern[p + 1], s[i], nocase) {
                        p += 2;
                        i += 1;
                        continue;
                    }
                }
                c => {
                    if same(c, s[i], nocase) {
                        p += 1;
                        i += 1;
                        continue;
                    }
                }
            }
        }
        match star {
            Some((sp, si)) => {
                p = sp;
                i = si + 1;
                star = Some((sp, si + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Matches `c` against the class starting at `pattern[p] == '['`. Returns (matched, index after
/// the class). An unterminated class runs to the end of the pattern, as in Redis.
fn class(pattern: &[u8], p: usize, c: u8, nocase: bool) -> Option<(bool, usize)> {
    let mut j = p + 1;
    let negate = pattern.get(j) == Some(&b'^');
    if negate {
        j += 1;
    }
    let mut matched = false;
    while j < pattern.len() && pattern[j] != b']' {
        if pattern[j] == b'\\' && j + 1 < pattern.len() {
            j += 1;
            matched |= same(pattern[j], c, nocase);
            j += 1;
        } else if j + 2 < pattern.len() && pattern[j + 1] == b'-' && pattern[j + 2] != b']' {
            let (mut lo, mut hi) = (pattern[j], pattern[j + 2]);
            if lo > hi {
                std::mem::swap(&mut lo, &mut hi);
            }
            let in_range = |c: u8| c >= lo && c <= hi;
            matched |= in_range(c)
                || (nocase
                    && (in_range(c.to_ascii_lowercase()) || in_range(c.to_ascii_uppercase())));
            j += 3;
        } else {
            matched |= same(pattern[j], c, nocase);
            j += 1;
        }
    }
    let next = if j < pattern.len() { j + 1 } else { j };
    Some((matched != negate, next))
}

#[cfg(test)]
mod tests {
    use super::{matches, matches_nocase};

    #[test]
    fn redis_glob_rules() {
        assert!(matches(b"*", b"anything"));
        assert!(matches(b"h?llo", b"hello"));
        assert!(matches(b"h*llo", b"heeeello"));
        assert!(matches(b"h[ae]llo", b"hallo"));
        assert!(!matches(b"h[ae]llo", b"hillo"));
        assert!(matches(b"h[^e]llo", b"hallo"));
        assert!(!matches(b"h[^e]llo", b"hello"));
        assert!(matches(b"h[a-b]llo", b"hbllo"));
        assert!(matches(b"h\\*llo", b"h*llo"));
        assert!(!matches(b"h\\*llo", b"hello"));
        assert!(matches(b"user:*:name", b"user:42:name"));
        assert!(!matches(b"a", b""));
        assert!(matches(b"", b""));
        assert!(matches(b"**", b""));
    }

    #[test]
    fn nocase_folds_ascii_case_in_literals_escapes_and_classes() {
        assert!(matches_nocase(b"MyLib*", b"mylib_v2"));
        assert!(!matches(b"MyLib*", b"mylib_v2"));
        assert!(matches_nocase(b"h[A-C]llo", b"hbllo"));
        assert!(matches_nocase(b"h[^E]llo", b"hallo"));
        assert!(!matches_nocase(b"h[^E]llo", b"hello"));
        assert!(matches_nocase(b"h\\Allo", b"hallo"));
    }

    #[test]
    fn hostile_pattern_is_fast() {
        // Exponential backtracking would never finish this; the single-backtrack matcher does
        // about len(pattern) * len(s) steps.
        let s = vec![b'a'; 10_000];
        assert!(!matches(b"*a*a*a*a*a*a*a*a*a*a*b", &s));
    }
}
