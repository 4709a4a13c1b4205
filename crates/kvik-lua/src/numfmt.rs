//! Number text as Lua 5.1 and Redis's C libraries print and read it: `%.14g` (Lua's
//! `tostring`, cjson), `%.17g` (redis.call arguments, via kvik-resp), `strtod`-style reading,
//! and C's double-to-`long long` cast.

/// `printf("%.<prec>g", d)`, for `prec` in 1..=17.
pub fn format_g(d: f64, prec: usize) -> String {
    if d.is_nan() {
        return if d.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.into();
    }
    let prec = prec.clamp(1, 17);
    let sci = format!("{:.*e}", prec - 1, d.abs());
    let (mant, exp) = sci.split_once('e').expect("exponent");
    let exp: i32 = exp.parse().expect("integer exponent");
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    let mut out = String::new();
    if d.is_sign_negative() {
        out.push('-');
    }
    if exp < -4 || exp >= prec as i32 {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exp.unsigned_abs()));
    } else if exp >= 0 {
        let int_len = exp as usize + 1;
        if digits.len() <= int_len {
            out.push_str(digits);
            out.push_str(&"0".repeat(int_len - digits.len()));
        } else {
            out.push_str(&digits[..int_len]);
            out.push('.');
            out.push_str(&digits[int_len..]);
        }
    } else {
        out.push_str("0.");
        out.push_str(&"0".repeat((-exp - 1) as usize));
        out.push_str(digits);
    }
    out
}

/// Lua 5.1's `tostring` of a number (`LUA_NUMBER_FMT` is `%.14g`).
pub fn lua_number_text(d: f64) -> String {
    format_g(d, 14)
}

/// Lua 5.1's string-to-number coercion (`luaO_str2d`): `strtod` over the whole string with
/// surrounding spaces allowed, and hexadecimal integers.
pub fn lua_str2number(s: &[u8]) -> Option<f64> {
    let t = std::str::from_utf8(s)
        .ok()?
        .trim_matches(|c: char| c.is_ascii_whitespace());
    if t.is_empty() {
        return None;
    }
    let (neg, body) = match t.as_bytes()[0] {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        let v = u64::from_str_radix(hex, 16).ok()? as f64;
        return Some(if neg { -v } else { v });
    }
    if body.starts_with(['+', '-']) {
        return None;
    }
    let v: f64 = body.parse().ok()?;
    Some(if neg { -v } else { v })
}

/// C's `(long long)d` on x86-64: truncation, and `LLONG_MIN` for NaN and out of range.
pub fn c_double_to_i64(d: f64) -> i64 {
    /// 2^63, the first double past `i64::MAX`.
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if !(-TWO_63..TWO_63).contains(&d) {
        i64::MIN
    } else {
        d as i64
    }
}

/// C's `(int)d` through Lua's `lua_tointeger` (`luaL_checkint`): truncate, then keep the low
/// 32 bits.
pub fn c_double_to_i32(d: f64) -> i32 {
    c_double_to_i64(d) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g_formats() {
        assert_eq!(format_g(0.1, 14), "0.1");
        assert_eq!(format_g(1e20, 14), "1e+20");
        assert_eq!(format_g(3.0, 14), "3");
        assert_eq!(format_g(-2.5, 14), "-2.5");
        assert_eq!(format_g(1.0 / 3.0, 14), "0.33333333333333");
        assert_eq!(format_g(0.00001, 14), "1e-05");
        assert_eq!(format_g(123456789012345.0, 14), "1.2345678901234e+14");
        assert_eq!(format_g(100.0, 14), "100");
        assert_eq!(format_g(0.0, 14), "0");
        assert_eq!(format_g(0.1, 17), "0.10000000000000001");
    }

    #[test]
    fn str2number() {
        assert_eq!(lua_str2number(b" 10 "), Some(10.0));
        assert_eq!(lua_str2number(b"0x10"), Some(16.0));
        assert_eq!(lua_str2number(b"1e2"), Some(100.0));
        assert_eq!(lua_str2number(b"x"), None);
        assert_eq!(lua_str2number(b""), None);
        assert_eq!(c_double_to_i64(1e20), i64::MIN);
        assert_eq!(c_double_to_i64(-3.7), -3);
        assert_eq!(c_double_to_i64(f64::NAN), i64::MIN);
    }
}
