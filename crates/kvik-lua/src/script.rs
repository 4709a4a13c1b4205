//! Script identity and the EVAL / FCALL argument rules shared by both engines.

use sha1::{Digest, Sha1};

use crate::errors;

/// SHA1 of `body` as lower-case hex: a script's name for EVALSHA, SCRIPT LOAD and
/// `redis.sha1hex`.
pub fn sha1_hex(body: &[u8]) -> String {
    let digest = Sha1::digest(body);
    let mut s = String::with_capacity(40);
    for b in digest {
        s.push(char::from_digit(u32::from(b >> 4), 16).expect("hex"));
        s.push(char::from_digit(u32::from(b & 0xf), 16).expect("hex"));
    }
    s
}

/// A script's keys and its other arguments.
pub type KeysArgs<'a> = (&'a [&'a [u8]], &'a [&'a [u8]]);

/// Splits `numkeys key... arg...` (what follows the script or function name in EVAL, EVALSHA
/// and FCALL) into keys and args, with Redis's errors in Redis's order.
pub fn split_keys_args<'a>(rest: &'a [&'a [u8]]) -> Result<KeysArgs<'a>, &'static str> {
    let Some((numkeys, tail)) = rest.split_first() else {
        return Err(errors::NOT_AN_INTEGER);
    };
    let n = kvik_resp::parse_i64(numkeys).ok_or(errors::NOT_AN_INTEGER)?;
    if n > tail.len() as i64 {
        return Err(errors::NUMKEYS_TOO_BIG);
    }
    if n < 0 {
        return Err(errors::NUMKEYS_NEGATIVE);
    }
    Ok(tail.split_at(n as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_is_lower_hex() {
        assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(
            sha1_hex(b"return 1"),
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
        );
    }

    #[test]
    fn numkeys_rules() {
        let argv: Vec<&[u8]> = vec![b"1", b"k", b"a"];
        let (k, a) = split_keys_args(&argv).unwrap();
        assert_eq!((k, a), (&argv[1..2], &argv[2..]));
        let argv: Vec<&[u8]> = vec![b"2", b"k"];
        assert_eq!(split_keys_args(&argv), Err(errors::NUMKEYS_TOO_BIG));
        let argv: Vec<&[u8]> = vec![b"-1"];
        assert_eq!(split_keys_args(&argv), Err(errors::NUMKEYS_NEGATIVE));
        let argv: Vec<&[u8]> = vec![b"x"];
        assert_eq!(split_keys_args(&argv), Err(errors::NOT_AN_INTEGER));
    }
}
