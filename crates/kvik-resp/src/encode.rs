//! Reply and command encoding: free functions appending RESP to a caller-owned `Vec<u8>`.
//!
//! The server writes every reply straight into the connection's output buffer with these, so
//! none of them allocates beyond growing `out`. Functions taking a [`Proto`] emit the RESP3
//! type when the client negotiated it and otherwise the RESP2 shape Redis 7.0 falls back to,
//! so command code never branches on the protocol itself.

use crate::double::{write_g17, G17_MAX_LEN};
use crate::Proto;

const CRLF: &[u8] = b"\r\n";

/// Appends the decimal digits of `n` without going through `core::fmt`.
fn write_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Appends `<marker><n>\r\n`, the header shared by lengths and aggregates.
fn header(out: &mut Vec<u8>, marker: u8, n: u64) {
    out.push(marker);
    write_u64(out, n);
    out.extend_from_slice(CRLF);
}

/// Appends `text` with each `\r` and `\n` replaced by a space: a line-based frame cannot
/// carry them, and Redis sanitises error texts the same way.
fn line_sanitized(out: &mut Vec<u8>, text: &[u8]) {
    if memchr::memchr2(b'\r', b'\n', text).is_none() {
        out.extend_from_slice(text);
    } else {
        out.extend(text.iter().map(|&c| match c {
            b'\r' | b'\n' => b' ',
            c => c,
        }));
    }
}

/// `+s\r\n`, a status reply such as `OK`. `\r`/`\n` in `s` become spaces so a bad status
/// cannot desynchronise the stream.
pub fn simple(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'+');
    line_sanitized(out, s);
    out.extend_from_slice(CRLF);
}

/// `-msg\r\n`. `msg` is the full text including its code (`ERR ...`, `WRONGTYPE ...`);
/// `\r`/`\n` become spaces, as Redis does.
pub fn error(out: &mut Vec<u8>, msg: &[u8]) {
    out.push(b'-');
    line_sanitized(out, msg);
    out.extend_from_slice(CRLF);
}

/// `:n\r\n`.
pub fn integer(out: &mut Vec<u8>, n: i64) {
    out.push(b':');
    if n < 0 {
        out.push(b'-');
    }
    write_u64(out, n.unsigned_abs());
    out.extend_from_slice(CRLF);
}

/// `$len\r\nb\r\n`.
pub fn bulk(out: &mut Vec<u8>, b: &[u8]) {
    out.reserve(b.len() + 16);
    header(out, b'$', b.len() as u64);
    out.extend_from_slice(b);
    out.extend_from_slice(CRLF);
}

/// The header of a bulk string of `len` bytes, for a writer that appends the bytes itself
/// (and then [`CRLF`]).
pub fn bulk_header(out: &mut Vec<u8>, len: u64) {
    header(out, b'$', len);
}

/// A missing value: RESP2 null bulk `$-1`, RESP3 `_`.
pub fn null(out: &mut Vec<u8>, p: Proto) {
    out.extend_from_slice(match p {
        Proto::Resp2 => b"$-1\r\n",
        Proto::Resp3 => b"_\r\n",
    });
}

/// A missing aggregate (e.g. a timed-out BLPOP): RESP2 null array `*-1`, RESP3 `_`.
pub fn null_array(out: &mut Vec<u8>, p: Proto) {
    out.extend_from_slice(match p {
        Proto::Resp2 => b"*-1\r\n",
        Proto::Resp3 => b"_\r\n",
    });
}

/// `*n\r\n`; the caller then writes `n` elements.
pub fn array_header(out: &mut Vec<u8>, n: usize) {
    header(out, b'*', n as u64);
}

/// A map of `n_pairs` key/value pairs: RESP3 `%n`, RESP2 a flat array of `2n` elements.
pub fn map_header(out: &mut Vec<u8>, n_pairs: usize, p: Proto) {
    match p {
        Proto::Resp2 => header(out, b'*', 2 * n_pairs as u64),
        Proto::Resp3 => header(out, b'%', n_pairs as u64),
    }
}

/// A set of `n` members: RESP3 `~n`, RESP2 `*n`.
pub fn set_header(out: &mut Vec<u8>, n: usize, p: Proto) {
    header(out, if p == Proto::Resp3 { b'~' } else { b'*' }, n as u64);
}

/// An out-of-band push (pub/sub message, invalidation): RESP3 `>n`, RESP2 `*n`.
pub fn push_header(out: &mut Vec<u8>, n: usize, p: Proto) {
    header(out, if p == Proto::Resp3 { b'>' } else { b'*' }, n as u64);
}

/// A double as Redis's `addReplyDouble`: RESP3 `,<%.17g>`, RESP2 a bulk string of the same
/// text; infinities as `inf`/`-inf`.
pub fn double(out: &mut Vec<u8>, d: f64, p: Proto) {
    match p {
        Proto::Resp3 => {
            out.push(b',');
            write_g17(out, d);
            out.extend_from_slice(CRLF);
        }
        Proto::Resp2 => {
            // The bulk header needs the length first: format into a scratch area at the end of
            // `out`, then move it behind the header.
            let mut text = [0u8; G17_MAX_LEN];
            let start = out.len();
            write_g17(out, d);
            let len = out.len() - start;
            text[..len].copy_from_slice(&out[start..]);
            out.truncate(start);
            bulk(out, &text[..len]);
        }
    }
}

/// A boolean: RESP3 `#t`/`#f`, RESP2 `:1`/`:0`.
pub fn boolean(out: &mut Vec<u8>, b: bool, p: Proto) {
    out.extend_from_slice(match (p, b) {
        (Proto::Resp3, true) => b"#t\r\n",
        (Proto::Resp3, false) => b"#f\r\n",
        (Proto::Resp2, true) => b":1\r\n",
        (Proto::Resp2, false) => b":0\r\n",
    });
}

/// An integer too large for `i64`, given as its decimal text: RESP3 `(s`, RESP2 a bulk string.
pub fn big_number(out: &mut Vec<u8>, s: &[u8], p: Proto) {
    match p {
        Proto::Resp3 => {
            out.push(b'(');
            line_sanitized(out, s);
            out.extend_from_slice(CRLF);
        }
        Proto::Resp2 => bulk(out, s),
    }
}

/// Text meant for humans (INFO, CLIENT LIST...): RESP3 `=len\r\nfmt:text`, RESP2 a bulk
/// string of `text` alone.
pub fn verbatim(out: &mut Vec<u8>, format: &[u8; 3], text: &[u8], p: Proto) {
    match p {
        Proto::Resp3 => {
            out.reserve(text.len() + 20);
            header(out, b'=', text.len() as u64 + 4);
            out.extend_from_slice(format);
            out.push(b':');
            out.extend_from_slice(text);
            out.extend_from_slice(CRLF);
        }
        Proto::Resp2 => bulk(out, text),
    }
}

/// A request as clients send it: `*n` followed by one bulk string per argument.
pub fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    let payload: usize = args.iter().map(|a| a.len() + 16).sum();
    out.reserve(payload + 16);
    array_header(out, args.len());
    for a in args {
        bulk(out, a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut out = Vec::new();
        f(&mut out);
        out
    }

    #[test]
    fn scalars() {
        assert_eq!(enc(|o| simple(o, b"OK")), b"+OK\r\n");
        assert_eq!(
            enc(|o| error(o, b"ERR bad\r\nthing")),
            b"-ERR bad  thing\r\n"
        );
        assert_eq!(enc(|o| integer(o, 0)), b":0\r\n");
        assert_eq!(enc(|o| integer(o, -42)), b":-42\r\n");
        assert_eq!(enc(|o| integer(o, i64::MIN)), b":-9223372036854775808\r\n");
        assert_eq!(enc(|o| integer(o, i64::MAX)), b":9223372036854775807\r\n");
        assert_eq!(enc(|o| bulk(o, b"")), b"$0\r\n\r\n");
        assert_eq!(enc(|o| bulk(o, b"foo")), b"$3\r\nfoo\r\n");
    }

    #[test]
    fn resp2_fallbacks() {
        use Proto::*;
        assert_eq!(enc(|o| null(o, Resp2)), b"$-1\r\n");
        assert_eq!(enc(|o| null(o, Resp3)), b"_\r\n");
        assert_eq!(enc(|o| null_array(o, Resp2)), b"*-1\r\n");
        assert_eq!(enc(|o| null_array(o, Resp3)), b"_\r\n");
        assert_eq!(enc(|o| map_header(o, 3, Resp2)), b"*6\r\n");
        assert_eq!(enc(|o| map_header(o, 3, Resp3)), b"%3\r\n");
        assert_eq!(enc(|o| set_header(o, 2, Resp2)), b"*2\r\n");
        assert_eq!(enc(|o| set_header(o, 2, Resp3)), b"~2\r\n");
        assert_eq!(enc(|o| push_header(o, 3, Resp2)), b"*3\r\n");
        assert_eq!(enc(|o| push_header(o, 3, Resp3)), b">3\r\n");
        assert_eq!(enc(|o| double(o, 0.1, Resp3)), b",0.10000000000000001\r\n");
        assert_eq!(
            enc(|o| double(o, 0.1, Resp2)),
            b"$19\r\n0.10000000000000001\r\n"
        );
        assert_eq!(enc(|o| double(o, f64::INFINITY, Resp2)), b"$3\r\ninf\r\n");
        assert_eq!(enc(|o| double(o, f64::NEG_INFINITY, Resp3)), b",-inf\r\n");
        assert_eq!(enc(|o| double(o, 2.0, Resp2)), b"$1\r\n2\r\n");
        assert_eq!(enc(|o| boolean(o, true, Resp3)), b"#t\r\n");
        assert_eq!(enc(|o| boolean(o, false, Resp2)), b":0\r\n");
        assert_eq!(enc(|o| big_number(o, b"123", Resp3)), b"(123\r\n");
        assert_eq!(enc(|o| big_number(o, b"123", Resp2)), b"$3\r\n123\r\n");
        assert_eq!(
            enc(|o| verbatim(o, b"txt", b"Some string", Resp3)),
            b"=15\r\ntxt:Some string\r\n"
        );
        assert_eq!(
            enc(|o| verbatim(o, b"txt", b"Some string", Resp2)),
            b"$11\r\nSome string\r\n"
        );
    }

    #[test]
    fn command_is_multibulk() {
        assert_eq!(
            enc(|o| command(o, &[b"SET", b"k", b""])),
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n"
        );
        assert_eq!(enc(|o| command(o, &[])), b"*0\r\n");
    }
}
