//! Number text the way Redis 7.0 writes and reads it.
//!
//! Clients compare reply strings, so doubles must print as C's `%.17g` does (Redis's
//! `addReplyDouble`), and arguments must be accepted or refused by the same rules as Redis's
//! `string2ll` and `strtod`-based checks, or a command would succeed here and fail there.

use std::fmt::{self, Write as _};

/// A fixed stack buffer for `core::fmt` output, so the reply hot path formats without
/// allocating.
struct StackBuf {
    buf: [u8; 48],
    len: usize,
}

impl StackBuf {
    fn new() -> Self {
        StackBuf {
            buf: [0; 48],
            len: 0,
        }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl fmt::Write for StackBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let b = s.as_bytes();
        let end = self.len + b.len();
        if end > self.buf.len() {
            return Err(fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(b);
        self.len = end;
        Ok(())
    }
}

/// Longest `%.17g` output: sign, 17 digits, point, `e-308`.
pub(crate) const G17_MAX_LEN: usize = 24;

/// Writes `d` as C's `printf("%.17g", d)` into `out` without allocating; see [`format_g17`].
pub fn write_g17(out: &mut Vec<u8>, d: f64) {
    if d.is_nan() {
        out.extend_from_slice(b"nan");
        return;
    }
    if d.is_infinite() {
        out.extend_from_slice(if d > 0.0 { b"inf" } else { b"-inf" });
        return;
    }
    if d.is_sign_negative() {
        out.push(b'-');
    }
    // Rust's exact formatting rounds the true binary value half-to-even, as glibc does, and
    // reports the exponent after rounding, which is the one %g uses to pick its style.
    let mut s = StackBuf::new();
    write!(s, "{:.16e}", d.abs()).expect("fits in buffer");
    let text = s.as_bytes();
    let e_pos = text
        .iter()
        .position(|&c| c == b'e')
        .expect("exponent present");
    let mut digits = [0u8; 17];
    digits[0] = text[0];
    digits[1..].copy_from_slice(&text[2..e_pos]);
    let exp: i32 = std::str::from_utf8(&text[e_pos + 1..])
        .ok()
        .and_then(|e| e.parse().ok())
        .expect("integer exponent");
    let mut nd = 17;
    while nd > 1 && digits[nd - 1] == b'0' {
        nd -= 1;
    }
    if (-4..17).contains(&exp) {
        if exp >= 0 {
            let int_len = exp as usize + 1;
            if nd <= int_len {
                out.extend_from_slice(&digits[..nd]);
                out.resize(out.len() + (int_len - nd), b'0');
            } else {
                out.extend_from_slice(&digits[..int_len]);
                out.push(b'.');
                out.extend_from_slice(&digits[int_len..nd]);
            }
        } else {
            out.extend_from_slice(b"0.");
            out.resize(out.len() + (-exp - 1) as usize, b'0');
            out.extend_from_slice(&digits[..nd]);
        }
    } else {
        out.push(digits[0]);
        if nd > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..nd]);
        }
        out.push(b'e');
        out.push(if exp < 0 { b'-' } else { b'+' });
        let e = exp.unsigned_abs();
        if e < 10 {
            out.push(b'0');
        }
        let mut eb = StackBuf::new();
        write!(eb, "{e}").expect("fits in buffer");
        out.extend_from_slice(eb.as_bytes());
    }
}

/// `d` as C's `printf("%.17g", d)`, the text Redis 7.0 replies with for doubles (scores,
/// geo distances...). 17 significant digits always round-trip, at the cost of showing the
/// binary error (`0.1` prints as `0.10000000000000001`); clients expect exactly that.
/// Infinities print as `inf`/`-inf` and NaN as `nan`, as Redis spells them.
pub fn format_g17(d: f64) -> String {
    let mut out = Vec::with_capacity(G17_MAX_LEN);
    write_g17(&mut out, d);
    String::from_utf8(out).expect("ASCII")
}

/// `d` as Redis's INCRBYFLOAT/HINCRBYFLOAT reply: plain decimal, never an exponent, no
/// trailing zeros, at most 17 decimals, `-0` shown as `0`.
///
/// Redis computes in `long double` and prints `%.17Lf` before trimming zeros; its extra
/// precision hides the binary error of typical inputs (`10.5 + 0.1` prints as `10.6`). With
/// `f64`, `%.17f` would print `10.59999999999999964`, so instead this prints the shortest
/// decimal that reads back as the same `f64`, which matches Redis whenever the `f64` result
/// is the double nearest to Redis's decimal (the common case: `10.6`, `5200`, `3`). It differs
/// when `f64` arithmetic drifts (`0.1 + 0.2` prints `0.30000000000000004`, Redis `0.3`) and
/// beyond ~17 significant digits, where `long double` keeps more digits. Values whose shortest
/// form needs more than 17 decimals are rounded to 17, as `%.17Lf` would.
pub fn format_human(d: f64) -> String {
    if d.is_nan() {
        return "nan".to_string();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    let mut s = format!("{d}");
    if let Some(dot) = s.find('.') {
        if s.len() - dot - 1 > 17 {
            s = format!("{d:.17}");
            let trimmed = s.trim_end_matches('0').trim_end_matches('.').len();
            s.truncate(trimmed);
        }
    }
    if s == "-0" {
        s = "0".to_string();
    }
    s
}

/// Parses a signed 64-bit integer by Redis's `string2ll` rules, which decide what INCRBY,
/// EXPIRE, LRANGE... accept: optional `-`, then `0` alone or digits without a leading zero;
/// no `+`, no spaces, no `-0`, at most 20 bytes, overflow refused.
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    if b == b"0" {
        return Some(0);
    }
    let (neg, digits) = match b[0] {
        b'-' => (true, &b[1..]),
        _ => (false, b),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    if neg {
        if v > i64::MIN.unsigned_abs() {
            return None;
        }
        Some((v as i64).wrapping_neg())
    } else {
        i64::try_from(v).ok()
    }
}

/// C's `isspace` in the "C" locale.
pub(crate) fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Parses a double by the rules of Redis's `getDoubleFromObject` (ZADD scores, ranges...):
/// whatever `strtod` consumes entirely, except an empty string, a leading space, NaN, and
/// overflow or underflow to zero. So `inf`, `+inf`, `-Infinity`, `1e3`, `.5`, `0x1p3` are
/// accepted; ` 1`, `1 `, `nan`, `1e400`, `1e-400` are not.
///
/// Hexadecimal mantissas longer than 16 significant digits are rounded once after truncation
/// to 64 bits (with a sticky bit), which is correct except for subnormal results.
pub fn parse_redis_double(b: &[u8]) -> Option<f64> {
    if b.is_empty() || is_c_space(b[0]) {
        return None;
    }
    let (neg, body) = match b[0] {
        b'-' => (true, &b[1..]),
        b'+' => (false, &b[1..]),
        _ => (false, b),
    };
    let (v, nonzero_mantissa, inf_literal) =
        if body.len() > 2 && body[0] == b'0' && (body[1] | 0x20) == b'x' {
            let (v, nz) = parse_hex_float(&body[2..])?;
            (v, nz, false)
        } else {
            // Rust's grammar differs from strtod's only in ways excluded anyway: it lacks hex
            // (handled above) and `nan(...)` (refused like every NaN).
            let s = std::str::from_utf8(body).ok()?;
            if s.starts_with(['+', '-']) {
                return None;
            }
            let v: f64 = s.parse().ok()?;
            let lower = s.to_ascii_lowercase();
            let inf_literal = lower == "inf" || lower == "infinity";
            let mantissa = body
                .iter()
                .take_while(|&&c| c != b'e' && c != b'E')
                .any(|c| (b'1'..=b'9').contains(c));
            (v, mantissa, inf_literal)
        };
    if v.is_nan() || (v.is_infinite() && !inf_literal) || (v == 0.0 && nonzero_mantissa) {
        return None;
    }
    Some(if neg { -v } else { v })
}

/// Parses the part of a C99 hex float after `0x`: returns the value and whether any mantissa
/// digit was non-zero (to tell underflow from a real zero).
fn parse_hex_float(s: &[u8]) -> Option<(f64, bool)> {
    let mut mant: u64 = 0;
    let mut exp: i64 = 0;
    let mut any_digit = false;
    let mut nonzero = false;
    let mut sticky = false;
    let mut seen_dot = false;
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if c == b'.' && !seen_dot {
            seen_dot = true;
            i += 1;
            continue;
        }
        let Some(v) = (c as char).to_digit(16) else {
            break;
        };
        any_digit = true;
        nonzero |= v != 0;
        if mant >> 60 == 0 {
            mant = mant * 16 + u64::from(v);
            if seen_dot {
                exp -= 4;
            }
        } else {
            if !seen_dot {
                exp += 4;
            }
            sticky |= v != 0;
        }
        i += 1;
    }
    if !any_digit {
        return None;
    }
    if i < s.len() {
        if s[i] | 0x20 != b'p' {
            return None;
        }
        i += 1;
        let neg = match s.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        if i >= s.len() {
            return None;
        }
        let mut e: i64 = 0;
        for &c in &s[i..] {
            if !c.is_ascii_digit() {
                return None;
            }
            e = (e * 10 + i64::from(c - b'0')).min(1 << 40);
        }
        exp += if neg { -e } else { e };
    }
    if sticky {
        // Below f64's 53-bit precision: only breaks round-to-even ties the right way.
        mant |= 1;
    }
    let mut v = mant as f64;
    while exp > 0 && v.is_finite() && v != 0.0 {
        let step = exp.min(1000);
        v *= 2f64.powi(step as i32);
        exp -= step;
    }
    while exp < 0 && v != 0.0 {
        let step = (-exp).min(1000);
        v /= 2f64.powi(step as i32);
        exp += step;
    }
    Some((v, nonzero))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g17_matches_printf() {
        let cases: &[(f64, &str)] = &[
            (0.1, "0.10000000000000001"),
            (1.0, "1"),
            (1e20, "1e+20"),
            // 1.5e-5 is 1.50000000000000003800e-05: its 17-digit rounding ends in zeros.
            (1.5e-5, "1.5e-05"),
            (123.0, "123"),
            (3.0e17, "3e+17"),
            (-0.0, "-0"),
            (0.0, "0"),
            (1e16, "10000000000000000"),
            (1e17, "1e+17"),
            (0.0001, "0.0001"),
            (0.00001, "1.0000000000000001e-05"),
            (-2.5, "-2.5"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (5e-324, "4.9406564584124654e-324"),
            (1e100, "1e+100"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
            // Exact ties at the 18th digit round half-to-even, as glibc does.
            (26217.0 / 262144.0, "0.10000991821289062"),
            (26215.0 / 262144.0, "0.10000228881835938"),
        ];
        for (d, want) in cases {
            assert_eq!(format_g17(*d), *want, "{d:e}");
        }
    }

    #[test]
    fn human_matches_incrbyfloat_examples() {
        assert_eq!(format_human(10.5), "10.5");
        assert_eq!(format_human(3.0), "3");
        assert_eq!(format_human(5.0e3), "5000");
        assert_eq!(format_human(5.0e3 + 2.0e2), "5200");
        assert_eq!(format_human(10.5 + 0.1), "10.6");
        assert_eq!(format_human(10.5 + 0.1 - 5.0), "5.6");
        assert_eq!(format_human(-0.0), "0");
        assert_eq!(format_human(1e-20), "0");
        assert_eq!(format_human(-1e-20), "0");
        assert_eq!(format_human(1e20), "100000000000000000000");
        assert_eq!(format_human(-1.25), "-1.25");
        assert_eq!(format_human(f64::INFINITY), "inf");
    }

    #[test]
    fn i64_follows_string2ll() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"123"), Some(123));
        assert_eq!(parse_i64(b"-123"), Some(-123));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"-0",
            b"01",
            b"+1",
            b" 1",
            b"1 ",
            b"1a",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"18446744073709551616",
            b"000000000000000000001",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn double_follows_strtod_checks() {
        let ok: &[(&[u8], f64)] = &[
            (b"1", 1.0),
            (b"-1.5", -1.5),
            (b"+2", 2.0),
            (b"1e3", 1000.0),
            (b"1E-2", 0.01),
            (b".5", 0.5),
            (b"5.", 5.0),
            (b"inf", f64::INFINITY),
            (b"+inf", f64::INFINITY),
            (b"-inf", f64::NEG_INFINITY),
            (b"-Infinity", f64::NEG_INFINITY),
            (b"0x10", 16.0),
            (b"0x1p3", 8.0),
            (b"-0x.8", -0.5),
            (b"0e999", 0.0),
            (b"5e-324", 5e-324),
        ];
        for (text, want) in ok {
            assert_eq!(parse_redis_double(text), Some(*want), "{text:?}");
        }
        for bad in [
            &b""[..],
            b" 1",
            b"1 ",
            b"nan",
            b"-nan",
            b"NaN",
            b"1e400",
            b"1e-400",
            b"abc",
            b"1e",
            b".",
            b"0x",
            b"0x1p",
            b"+-1",
            b"--1",
            b"infinit",
        ] {
            assert_eq!(
                parse_redis_double(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
