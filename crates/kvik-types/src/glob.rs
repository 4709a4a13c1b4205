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

/// The text every string `pattern` matches (case-sensitively) starts with: the pattern up to
/// its first `*`, `?` or `[`, escapes resolved. Keys stored in order can then be read from the
/// first one with this prefix to the last, instead of all of them (SCAN MATCH, KEYS).
pub fn literal_prefix(pattern: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut p = 0;
    while p < pattern.len() {
        match pattern[p] {
            b'*' | b'?' | b'[' => break,
            b'\\' if p + 1 < pattern.len() => {
                out.push(pattern[p + 1]);
                p += 2;
            }
            c => {
                out.push(c);
                p += 1;
            }
        }
    }
    out
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
    use super::{literal_prefix, matches, matches_nocase};
    use proptest::prelude::*;

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

    #[test]
    fn the_literal_prefix_stops_at_the_first_wildcard() {
        assert_eq!(literal_prefix(b"user:*"), b"user:");
        assert_eq!(literal_prefix(b"user:4?:name"), b"user:4");
        assert_eq!(literal_prefix(b"h[ae]llo"), b"h");
        assert_eq!(literal_prefix(b"a\\*b*"), b"a*b");
        assert_eq!(literal_prefix(b"exact"), b"exact");
        assert_eq!(literal_prefix(b"*x"), b"");
        assert_eq!(literal_prefix(b"ends\\"), b"ends\\");
    }

    proptest! {
        /// Whatever a pattern matches starts with its literal prefix (the property the
        /// prefix-bounded SCAN relies on to skip the keys outside it).
        #[test]
        fn every_match_starts_with_the_literal_prefix(
            pattern in proptest::collection::vec(prop::sample::select(b"ab*?[]^-\\".to_vec()), 0..8),
            s in proptest::collection::vec(prop::sample::select(b"ab*?[]\\".to_vec()), 0..8),
        ) {
            if matches(&pattern, &s) {
                prop_assert!(s.starts_with(&literal_prefix(&pattern)));
            }
        }
    }
}
