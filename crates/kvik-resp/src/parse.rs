//! [`parse_frame`]: the generic RESP2/RESP3 parser the client uses for replies.
//!
//! Replies are usually small, so this parser is stateless and simply re-scans when more bytes
//! arrive. It walks the frame twice with the same code: first only validating and measuring,
//! allocating nothing, and only once the whole frame is known to be present and valid again to
//! build it. An incomplete or hostile reply therefore costs no allocation at all, whatever
//! lengths it declares, and the build pass can size every vector exactly.

use memchr::memchr;

use crate::error::ProtocolError;
use crate::frame::Frame;
use crate::limits::Limits;

type Parsed<T> = Result<Option<T>, ProtocolError>;

/// Parses one complete frame of any RESP2/RESP3 type from the start of `buf`.
///
/// Returns `Ok(None)` while the frame is incomplete, and `Ok(Some((frame, consumed)))` once it
/// is whole; the caller then drops `consumed` bytes. Errors are final: the stream cannot be
/// resynchronised. Attributes (`|`) are skipped and the value after them is returned.
/// Lengths and counts are checked against `limits` before anything is awaited or allocated,
/// and nesting deeper than `limits.max_depth` is refused.
pub fn parse_frame(buf: &[u8], limits: &Limits) -> Result<Option<(Frame, usize)>, ProtocolError> {
    let end = match Walker::<false>::new(buf, limits).value(0, 0)? {
        Some((_, end)) => end,
        None => return Ok(None),
    };
    let (frame, built_end) = Walker::<true>::new(buf, limits)
        .value(0, 0)?
        .expect("frame validated as complete");
    debug_assert_eq!(end, built_end);
    Ok(Some((frame, end)))
}

/// One pass over a frame. With `BUILD == false` it only validates and returns `Frame::Null`
/// placeholders, allocating nothing.
struct Walker<'a, const BUILD: bool> {
    buf: &'a [u8],
    limits: &'a Limits,
}

impl<'a, const BUILD: bool> Walker<'a, BUILD> {
    fn new(buf: &'a [u8], limits: &'a Limits) -> Self {
        Walker { buf, limits }
    }

    /// The line starting at `pos` (without its CRLF) and the position after it; `max` bounds
    /// its length. The bound is checked on a window so the verdict does not depend on how
    /// much of the stream has arrived.
    fn line(&self, pos: usize, max: usize) -> Parsed<(&'a [u8], usize)> {
        let rest = &self.buf[pos.min(self.buf.len())..];
        let window = rest.len().min(max.saturating_add(2));
        match memchr(b'\n', &rest[..window]) {
            Some(i) if i > 0 && rest[i - 1] == b'\r' => Ok(Some((&rest[..i - 1], pos + i + 1))),
            Some(_) => Err(ProtocolError::InvalidLineEnding),
            None if rest.len() >= max.saturating_add(2) => Err(ProtocolError::TooBigLine),
            None => Ok(None),
        }
    }

    fn number_line(&self, pos: usize, err: ProtocolError) -> Parsed<(i64, usize)> {
        let Some((line, next)) = self.line(pos, self.limits.max_inline_len)? else {
            return Ok(None);
        };
        let n = std::str::from_utf8(line)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .ok_or(err)?;
        Ok(Some((n, next)))
    }

    /// Parses a length-prefixed payload (`$`, `=`, `!`); `None` inside for a `-1` length
    /// where `allow_null`.
    #[allow(clippy::type_complexity)]
    fn blob(&self, pos: usize, allow_null: bool) -> Parsed<(Option<&'a [u8]>, usize)> {
        let Some((len, start)) = self.number_line(pos, ProtocolError::InvalidBulkLength)? else {
            return Ok(None);
        };
        if len == -1 && allow_null {
            return Ok(Some((None, start)));
        }
        if len < 0 || len as u64 > self.limits.max_bulk_len {
            return Err(ProtocolError::InvalidBulkLength);
        }
        let len = usize::try_from(len).map_err(|_| ProtocolError::InvalidBulkLength)?;
        let end = start
            .checked_add(len)
            .and_then(|e| e.checked_add(2))
            .ok_or(ProtocolError::InvalidBulkLength)?;
        if self.buf.len() < end {
            return Ok(None);
        }
        if &self.buf[end - 2..end] != b"\r\n" {
            return Err(ProtocolError::InvalidLineEnding);
        }
        Ok(Some((Some(&self.buf[start..end - 2]), end)))
    }

    /// Parses the `n` elements of an aggregate starting at `pos`.
    fn elements(&self, n: usize, mut pos: usize, depth: usize) -> Parsed<(Vec<Frame>, usize)> {
        // Only the build pass allocates, and it runs on a frame known to be complete, whose
        // `n` elements of at least 3 bytes each are all in the buffer.
        let mut items = Vec::with_capacity(if BUILD { n } else { 0 });
        for _ in 0..n {
            let Some((f, next)) = self.value(pos, depth)? else {
                return Ok(None);
            };
            if BUILD {
                items.push(f);
            }
            pos = next;
        }
        Ok(Some((items, pos)))
    }

    /// Parses the value at `pos`, `depth` aggregates deep.
    fn value(&self, mut pos: usize, depth: usize) -> Parsed<(Frame, usize)> {
        loop {
            let Some(&marker) = self.buf.get(pos) else {
                return Ok(None);
            };
            let body = pos + 1;
            let max_line = usize::try_from(self.limits.max_bulk_len).unwrap_or(usize::MAX);
            let frame = match marker {
                b'+' | b'-' | b'(' | b',' | b'#' | b'_' => {
                    let max = if matches!(marker, b'+' | b'-') {
                        max_line
                    } else {
                        self.limits.max_inline_len
                    };
                    let Some((line, next)) = self.line(body, max)? else {
                        return Ok(None);
                    };
                    (self.scalar(marker, line)?, next)
                }
                b':' => {
                    let Some((n, next)) = self.number_line(body, ProtocolError::InvalidInteger)?
                    else {
                        return Ok(None);
                    };
                    (Frame::Integer(n), next)
                }
                b'$' | b'=' | b'!' => {
                    let Some((data, next)) = self.blob(body, marker == b'$')? else {
                        return Ok(None);
                    };
                    (self.blob_frame(marker, data)?, next)
                }
                b'*' | b'%' | b'~' | b'>' | b'|' => {
                    let Some((n, next)) =
                        self.number_line(body, ProtocolError::InvalidMultibulkLength)?
                    else {
                        return Ok(None);
                    };
                    if n == -1 && marker == b'*' {
                        return Ok(Some((Frame::Null, next)));
                    }
                    if n < 0 || n as u64 > self.limits.max_multibulk_len {
                        return Err(ProtocolError::InvalidMultibulkLength);
                    }
                    if depth >= self.limits.max_depth {
                        return Err(ProtocolError::TooDeep);
                    }
                    let pairs = matches!(marker, b'%' | b'|');
                    let count = usize::try_from(n)
                        .ok()
                        .and_then(|n| n.checked_mul(if pairs { 2 } else { 1 }))
                        .ok_or(ProtocolError::InvalidMultibulkLength)?;
                    if marker == b'|' {
                        // Attribute metadata: validate it, drop it, then return the value it
                        // annotates in its place.
                        let skipper = Walker::<false>::new(self.buf, self.limits);
                        let Some((_, after)) = skipper.elements(count, next, depth + 1)? else {
                            return Ok(None);
                        };
                        pos = after;
                        continue;
                    }
                    let Some((items, end)) = self.elements(count, next, depth + 1)? else {
                        return Ok(None);
                    };
                    (aggregate(marker, items, BUILD), end)
                }
                other => return Err(ProtocolError::InvalidFrameType(other)),
            };
            return Ok(Some(frame));
        }
    }

    fn scalar(&self, marker: u8, line: &[u8]) -> Result<Frame, ProtocolError> {
        let text = || String::from_utf8_lossy(line).into_owned();
        Ok(match marker {
            b'+' if BUILD => Frame::Simple(text()),
            b'-' if BUILD => Frame::Error(text()),
            b'(' => {
                let digits = line.strip_prefix(b"-").unwrap_or(line);
                let digits = digits.strip_prefix(b"+").unwrap_or(digits);
                if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                    return Err(ProtocolError::InvalidBigNumber);
                }
                if BUILD {
                    Frame::BigNumber(text())
                } else {
                    Frame::Null
                }
            }
            b',' => Frame::Double(parse_resp_double(line).ok_or(ProtocolError::InvalidDouble)?),
            b'#' => match line {
                b"t" => Frame::Boolean(true),
                b"f" => Frame::Boolean(false),
                _ => return Err(ProtocolError::InvalidBoolean),
            },
            b'_' if !line.is_empty() => return Err(ProtocolError::InvalidNull),
            _ => Frame::Null,
        })
    }

    fn blob_frame(&self, marker: u8, data: Option<&[u8]>) -> Result<Frame, ProtocolError> {
        let Some(data) = data else {
            return Ok(Frame::Null);
        };
        if marker == b'=' && (data.len() < 4 || data[3] != b':') {
            return Err(ProtocolError::InvalidVerbatim);
        }
        if !BUILD {
            return Ok(Frame::Null);
        }
        Ok(match marker {
            b'$' => Frame::Bulk(data.to_vec()),
            b'!' => Frame::BlobError(data.to_vec()),
            _ => Frame::Verbatim {
                format: String::from_utf8_lossy(&data[..3]).into_owned(),
                text: data[4..].to_vec(),
            },
        })
    }
}

fn aggregate(marker: u8, items: Vec<Frame>, build: bool) -> Frame {
    if !build {
        return Frame::Null;
    }
    match marker {
        b'*' => Frame::Array(items),
        b'~' => Frame::Set(items),
        b'>' => Frame::Push(items),
        _ => {
            let mut pairs = Vec::with_capacity(items.len() / 2);
            let mut it = items.into_iter();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                pairs.push((k, v));
            }
            Frame::Map(pairs)
        }
    }
}

/// RESP3 doubles: `inf`, `-inf`, `nan` and decimal notation. Rust's grammar is a superset
/// (case-insensitive `infinity`), which is harmless for a reader.
fn parse_resp_double(line: &[u8]) -> Option<f64> {
    std::str::from_utf8(line).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(b: &[u8]) -> Result<Option<(Frame, usize)>, ProtocolError> {
        parse_frame(b, &Limits::default())
    }

    fn full(b: &[u8]) -> Frame {
        let (f, n) = parse(b).unwrap().unwrap();
        assert_eq!(n, b.len());
        for cut in 0..b.len() {
            assert_eq!(parse(&b[..cut]), Ok(None), "prefix {cut}");
        }
        f
    }

    #[test]
    fn resp2_types() {
        assert_eq!(full(b"+OK\r\n"), Frame::Simple("OK".into()));
        assert_eq!(full(b"-ERR x\r\n"), Frame::Error("ERR x".into()));
        assert_eq!(full(b":-12\r\n"), Frame::Integer(-12));
        assert_eq!(full(b"$3\r\na\r\n\r\n"), Frame::Bulk(b"a\r\n".to_vec()));
        assert_eq!(full(b"$-1\r\n"), Frame::Null);
        assert_eq!(full(b"*-1\r\n"), Frame::Null);
        assert_eq!(
            full(b"*2\r\n$1\r\na\r\n*0\r\n"),
            Frame::Array(vec![Frame::Bulk(b"a".to_vec()), Frame::Array(vec![])])
        );
    }

    #[test]
    fn resp3_types() {
        assert_eq!(full(b"_\r\n"), Frame::Null);
        assert_eq!(full(b",1.5\r\n"), Frame::Double(1.5));
        assert_eq!(full(b",-inf\r\n"), Frame::Double(f64::NEG_INFINITY));
        assert!(matches!(full(b",nan\r\n"), Frame::Double(d) if d.is_nan()));
        assert_eq!(full(b"#f\r\n"), Frame::Boolean(false));
        assert_eq!(full(b"(-123\r\n"), Frame::BigNumber("-123".into()));
        assert_eq!(
            full(b"=15\r\ntxt:Some string\r\n"),
            Frame::Verbatim {
                format: "txt".into(),
                text: b"Some string".to_vec()
            }
        );
        assert_eq!(full(b"!3\r\nE x\r\n"), Frame::BlobError(b"E x".to_vec()));
        assert_eq!(
            full(b"%1\r\n+a\r\n:1\r\n"),
            Frame::Map(vec![(Frame::Simple("a".into()), Frame::Integer(1))])
        );
        assert_eq!(
            full(b"~1\r\n#t\r\n"),
            Frame::Set(vec![Frame::Boolean(true)])
        );
        assert_eq!(full(b">1\r\n:1\r\n"), Frame::Push(vec![Frame::Integer(1)]));
    }

    #[test]
    fn attributes_are_skipped() {
        assert_eq!(full(b"|1\r\n+ttl\r\n:3\r\n:42\r\n"), Frame::Integer(42));
        assert_eq!(
            full(b"*2\r\n|1\r\n+a\r\n*1\r\n:0\r\n:1\r\n:2\r\n"),
            Frame::Array(vec![Frame::Integer(1), Frame::Integer(2)])
        );
    }

    #[test]
    fn errors() {
        use ProtocolError::*;
        let cases: &[(&[u8], ProtocolError)] = &[
            (b"?x\r\n", InvalidFrameType(b'?')),
            (b":1x\r\n", InvalidInteger),
            (b":\r\n", InvalidInteger),
            (b",x\r\n", InvalidDouble),
            (b"#x\r\n", InvalidBoolean),
            (b"(1a\r\n", InvalidBigNumber),
            (b"_x\r\n", InvalidNull),
            (b"=3\r\ntxt\r\n", InvalidVerbatim),
            (b"=5\r\ntxt-x\r\n", InvalidVerbatim),
            (b"+OK\n", InvalidLineEnding),
            (b"$1\r\nabc", InvalidLineEnding),
            (b"$-2\r\n", InvalidBulkLength),
            (b"$x\r\n", InvalidBulkLength),
            (b"!-1\r\n", InvalidBulkLength),
            (b"%-1\r\n", InvalidMultibulkLength),
            (b"*-2\r\n", InvalidMultibulkLength),
            (b"*2147483648\r\n", InvalidMultibulkLength),
            (b"$1099511627776\r\n", InvalidBulkLength),
        ];
        for (input, want) in cases {
            assert_eq!(parse(input), Err(want.clone()), "{:?}", input);
        }
    }

    #[test]
    fn huge_declared_count_waits_without_allocating() {
        assert_eq!(parse(b"*2147483647\r\n:1\r\n"), Ok(None));
        assert_eq!(parse(b"%1073741823\r\n"), Ok(None));
    }

    #[test]
    fn depth_is_limited() {
        let limits = Limits {
            max_depth: 3,
            ..Limits::default()
        };
        let ok = b"*1\r\n*1\r\n*1\r\n:1\r\n";
        assert!(parse_frame(ok, &limits).unwrap().is_some());
        let deep = b"*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n";
        assert_eq!(parse_frame(deep, &limits), Err(ProtocolError::TooDeep));
        // Refused as soon as the too-deep header is seen, before its content arrives.
        assert_eq!(
            parse_frame(&deep[..16], &limits),
            Err(ProtocolError::TooDeep)
        );
    }

    #[test]
    fn line_limits() {
        let limits = Limits {
            max_bulk_len: 4,
            ..Limits::default()
        };
        assert!(parse_frame(b"+abcd\r\n", &limits).unwrap().is_some());
        assert_eq!(
            parse_frame(b"+abcde\r\n", &limits),
            Err(ProtocolError::TooBigLine)
        );
        assert_eq!(
            parse_frame(b"+abcdef", &limits),
            Err(ProtocolError::TooBigLine)
        );
        assert_eq!(parse_frame(b"+abcd\r", &limits), Ok(None));
        assert_eq!(
            parse_frame(b"$5\r\n", &limits),
            Err(ProtocolError::InvalidBulkLength)
        );
    }
}
