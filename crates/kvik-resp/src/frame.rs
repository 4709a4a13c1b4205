//! [`Frame`]: an owned RESP2/RESP3 value, as the client library hands replies to its users.
//!
//! The server never builds frames on its hot path (it encodes replies directly with
//! [`encode`]); frames exist for the client, for tests that read a server's
//! replies, and for the rare reply that is easier to build as a tree.

use crate::encode;
use crate::Proto;

/// A RESP2/RESP3 value.
///
/// Attributes (`|`) are not represented: they are out-of-band metadata, and
/// [`parse_frame`](crate::parse_frame) skips them and returns the value they annotate.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    /// `+text`: a status such as `OK`.
    Simple(String),
    /// `-text`: an error, code included (`ERR ...`).
    Error(String),
    /// `:n`.
    Integer(i64),
    /// `$len`: a binary-safe string.
    Bulk(Vec<u8>),
    /// RESP2 `$-1` and `*-1`, RESP3 `_`: the protocols spell absence three ways, callers need
    /// only one.
    Null,
    /// `*n`.
    Array(Vec<Frame>),
    /// `%n`: ordered key/value pairs (order is the server's, and keys may repeat).
    Map(Vec<(Frame, Frame)>),
    /// `~n`.
    Set(Vec<Frame>),
    /// `>n`: an out-of-band message (pub/sub, client tracking).
    Push(Vec<Frame>),
    /// `,d`.
    Double(f64),
    /// `#t` / `#f`.
    Boolean(bool),
    /// `(digits`: an integer beyond `i64`, kept as text.
    BigNumber(String),
    /// `=len\r\nfmt:text`: text for humans with its 3-byte format (`txt`, `mkd`).
    Verbatim {
        /// The 3-byte format tag.
        format: String,
        /// The text after the tag.
        text: Vec<u8>,
    },
    /// `!len`: a binary-safe error.
    BlobError(Vec<u8>),
}

impl Frame {
    /// Appends the RESP3 wire form of this frame.
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.encode_with(out, Proto::Resp3);
    }

    /// Appends this frame as `p` spells it. RESP2 has no null distinct from the null bulk, no
    /// maps, sets, pushes, doubles, booleans, big numbers, verbatim or blob errors: those take
    /// Redis's RESP2 fallback shapes, so the encoding is lossy for RESP2.
    pub fn encode_with(&self, out: &mut Vec<u8>, p: Proto) {
        match self {
            Frame::Simple(s) => encode::simple(out, s.as_bytes()),
            Frame::Error(s) => encode::error(out, s.as_bytes()),
            Frame::Integer(n) => encode::integer(out, *n),
            Frame::Bulk(b) => encode::bulk(out, b),
            Frame::Null => encode::null(out, p),
            Frame::Array(items) => {
                encode::array_header(out, items.len());
                items.iter().for_each(|f| f.encode_with(out, p));
            }
            Frame::Map(pairs) => {
                encode::map_header(out, pairs.len(), p);
                for (k, v) in pairs {
                    k.encode_with(out, p);
                    v.encode_with(out, p);
                }
            }
            Frame::Set(items) => {
                encode::set_header(out, items.len(), p);
                items.iter().for_each(|f| f.encode_with(out, p));
            }
            Frame::Push(items) => {
                encode::push_header(out, items.len(), p);
                items.iter().for_each(|f| f.encode_with(out, p));
            }
            Frame::Double(d) => encode::double(out, *d, p),
            Frame::Boolean(b) => encode::boolean(out, *b, p),
            Frame::BigNumber(s) => encode::big_number(out, s.as_bytes(), p),
            Frame::Verbatim { format, text } => match p {
                // Written by hand rather than via encode::verbatim so a format that is not
                // exactly 3 bytes is still emitted as given.
                Proto::Resp3 => {
                    out.push(b'=');
                    out.extend_from_slice((format.len() + 1 + text.len()).to_string().as_bytes());
                    out.extend_from_slice(b"\r\n");
                    out.extend_from_slice(format.as_bytes());
                    out.push(b':');
                    out.extend_from_slice(text);
                    out.extend_from_slice(b"\r\n");
                }
                Proto::Resp2 => encode::bulk(out, text),
            },
            Frame::BlobError(b) => match p {
                Proto::Resp3 => {
                    out.push(b'!');
                    out.extend_from_slice(b.len().to_string().as_bytes());
                    out.extend_from_slice(b"\r\n");
                    out.extend_from_slice(b);
                    out.extend_from_slice(b"\r\n");
                }
                Proto::Resp2 => encode::error(out, b),
            },
        }
    }

    /// This frame's RESP3 wire form as a new buffer; convenient in tests.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resp3_and_resp2_forms() {
        let f = Frame::Map(vec![(
            Frame::Simple("k".into()),
            Frame::Set(vec![Frame::Double(1.5), Frame::Boolean(true), Frame::Null]),
        )]);
        assert_eq!(f.to_bytes(), b"%1\r\n+k\r\n~3\r\n,1.5\r\n#t\r\n_\r\n");
        let mut out = Vec::new();
        f.encode_with(&mut out, Proto::Resp2);
        assert_eq!(out, b"*2\r\n+k\r\n*3\r\n$3\r\n1.5\r\n:1\r\n$-1\r\n");
        let v = Frame::Verbatim {
            format: "txt".into(),
            text: b"Some string".to_vec(),
        };
        assert_eq!(v.to_bytes(), b"=15\r\ntxt:Some string\r\n");
        assert_eq!(
            Frame::BlobError(b"E x".to_vec()).to_bytes(),
            b"!3\r\nE x\r\n"
        );
        let mut out = Vec::new();
        Frame::BlobError(b"E\r\nx".to_vec()).encode_with(&mut out, Proto::Resp2);
        assert_eq!(out, b"-E  x\r\n");
    }
}
