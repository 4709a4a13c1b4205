//! Redis's integer parsers (util.c's `string2ll` and `string2ull`), which the value algorithms
//! share: their exact acceptance rules decide which arguments are errors.

/// `string2ll`: an optional `-`, then digits with no leading zero (except "0" itself), no
/// spaces, no `+`, at most 20 bytes, within `i64`.
pub(crate) fn string2ll(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() >= 21 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if negative {
        if v > 1u64 << 63 {
            return None;
        }
        Some((v as i64).wrapping_neg())
    } else {
        i64::try_from(v).ok()
    }
}

/// `string2ull`: `string2ll` when it accepts (negative values rejected), else C's
/// `strtoull(s, &end, 10)`, which must consume the whole string: it skips leading white space,
/// takes a `+` or `-` sign (a `-` negates modulo 2^64) and fails on overflow. The string ends at
/// its first NUL byte, as the C string Redis hands over.
pub(crate) fn string2ull(s: &[u8]) -> Option<u64> {
    let s = match s.iter().position(|&b| b == 0) {
        Some(nul) => &s[..nul],
        None => s,
    };
    if let Some(v) = string2ll(s) {
        return u64::try_from(v).ok();
    }
    strtoull_whole(s)
}

fn strtoull_whole(s: &[u8]) -> Option<u64> {
    let is_c_space = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let start = s.iter().position(|b| !is_c_space(b)).unwrap_or(s.len());
    let mut rest = &s[start..];
    let mut negative = false;
    if let Some((&sign, tail)) = rest.split_first() {
        if sign == b'+' || sign == b'-' {
            negative = sign == b'-';
            rest = tail;
        }
    }
    if rest.is_empty() || !rest.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in rest {
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if negative { v.wrapping_neg() } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string2ll_rules() {
        assert_eq!(string2ll(b"0"), Some(0));
        assert_eq!(string2ll(b"-0"), None);
        assert_eq!(string2ll(b"007"), None);
        assert_eq!(string2ll(b"+7"), None);
        assert_eq!(string2ll(b" 7"), None);
        assert_eq!(string2ll(b"-"), None);
        assert_eq!(string2ll(b""), None);
        assert_eq!(string2ll(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(string2ll(b"9223372036854775808"), None);
        assert_eq!(string2ll(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(string2ll(b"-9223372036854775809"), None);
    }

    #[test]
    fn string2ull_falls_back_to_strtoull() {
        assert_eq!(string2ull(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(string2ull(b"18446744073709551616"), None);
        assert_eq!(string2ull(b"-1"), None);
        assert_eq!(string2ull(b" 5"), Some(5));
        assert_eq!(string2ull(b"+5"), Some(5));
        assert_eq!(string2ull(b"007"), Some(7));
        assert_eq!(string2ull(b" -5"), Some(5u64.wrapping_neg()));
        assert_eq!(string2ull(b"5 "), None);
        assert_eq!(string2ull(b""), None);
        assert_eq!(string2ull(b" "), None);
        assert_eq!(string2ull(b"5\0junk"), Some(5));
    }
}
