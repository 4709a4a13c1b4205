//! [`RequestParser`]: the server's request parser, a port of the behaviour of Redis 7.0's
//! `processMultibulkBuffer` and `processInlineBuffer`.
//!
//! Clients and test suites depend on Redis's exact errors and on its leniencies, so both are
//! reproduced, including the odd ones: the two bytes after a `\r` that ends a length line, and
//! the two bytes after a bulk payload, are skipped without being checked. The parser is
//! resumable so a request arriving in many reads is scanned once: it remembers the argument
//! count, the spans found so far, and how far it has searched for the current line's end.
//!
//! Deliberate differences, none reachable by a client speaking the protocol:
//! - Redis finds line ends with `strchr`, which stops at a NUL byte; here NUL is an ordinary
//!   byte (an inline request still ends its content at a NUL, as `sdssplitargs` does).
//! - Redis reports an over-long line only when a whole read lacked its end; here the verdict
//!   depends only on the line's length (over [`Limits::max_inline_len`]), not on how the bytes
//!   were split across reads.

use std::ops::Range;

use memchr::memchr;

use crate::double::{is_c_space, parse_i64};
use crate::error::ProtocolError;
use crate::limits::{Limits, UNAUTH_MAX_BULK_LEN, UNAUTH_MAX_MULTIBULK_LEN};

/// Vector capacity reserved up front for a multibulk request's spans: a client may declare
/// 2^31-1 arguments and send none, so the declared count is never trusted for allocation.
const MAX_PREALLOC_ARGS: u64 = 1024;

/// A complete request's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestArgs {
    /// Multibulk arguments, as ranges into the `buf` given to [`RequestParser::parse`]: the
    /// bytes are used in place, without copying.
    Spans(Vec<Range<usize>>),
    /// Inline arguments, owned because quotes and escapes make them differ from the input.
    Inline(Vec<Vec<u8>>),
}

impl RequestArgs {
    /// The number of arguments.
    pub fn len(&self) -> usize {
        match self {
            RequestArgs::Spans(s) => s.len(),
            RequestArgs::Inline(a) => a.len(),
        }
    }

    /// True for a request with no arguments, which the server silently skips.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Argument `i`'s bytes, given the same `buf` the request was parsed from.
    pub fn get<'a>(&'a self, buf: &'a [u8], i: usize) -> Option<&'a [u8]> {
        match self {
            RequestArgs::Spans(s) => s.get(i).map(|r| &buf[r.clone()]),
            RequestArgs::Inline(a) => a.get(i).map(Vec::as_slice),
        }
    }

    /// All arguments as slices, given the same `buf` the request was parsed from.
    pub fn to_slices<'a>(&'a self, buf: &'a [u8]) -> Vec<&'a [u8]> {
        (0..self.len())
            .map(|i| self.get(buf, i).expect("index in range"))
            .collect()
    }
}

/// A complete request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The arguments; empty for a blank inline line, `*0` or `*-1`, which Redis skips.
    pub args: RequestArgs,
    /// Bytes of the buffer this request used, to drop from its front.
    pub consumed: usize,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// No request started.
    #[default]
    Idle,
    Inline,
    Multibulk,
}

/// Where a search for a line's end stopped.
enum Line {
    /// The terminator's index in the buffer.
    Found(usize),
    Incomplete,
    TooBig,
}

/// Resumable request parser, one per connection.
///
/// Feed it the connection's unconsumed bytes. `Ok(None)` means more are needed: append them
/// after the same bytes and call again; progress is kept, so nothing is re-scanned. After
/// `Ok(Some(req))`, drop `req.consumed` bytes from the front; the next call starts afresh.
/// After an `Err`, reply with the error's text and close the connection, as Redis does.
#[derive(Debug, Default)]
pub struct RequestParser {
    kind: Kind,
    /// Multibulk arguments still expected; 0 while the count line is still unparsed.
    remaining: u64,
    /// Offset in the buffer where parsing resumes.
    pos: usize,
    /// Length of the current bulk argument once its `$` line has been parsed.
    bulk_len: Option<usize>,
    spans: Vec<Range<usize>>,
    /// Offset up to which the current line has been searched in vain for its end.
    scanned: usize,
    /// An emptied spans vector handed back by [`RequestParser::recycle`], reused for the next
    /// request so a connection's steady state parses without allocating.
    spare: Vec<Range<usize>>,
}

impl RequestParser {
    /// A parser with no request in progress.
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets any partial request.
    pub fn reset(&mut self) {
        let spare = std::mem::take(&mut self.spare);
        *self = Self {
            spare,
            ..Self::default()
        };
    }

    /// Gives back the spans of a request whose arguments were taken, for the next request
    /// to fill. Kept only up to [`MAX_PREALLOC_ARGS`] entries, the most reserved up front.
    pub fn recycle(&mut self, mut spans: Vec<Range<usize>>) {
        if spans.capacity() <= MAX_PREALLOC_ARGS as usize
            && spans.capacity() > self.spare.capacity()
        {
            spans.clear();
            self.spare = spans;
        }
    }

    /// True while a partial request is held, i.e. the last call returned `Ok(None)` after
    /// seeing at least one byte.
    pub fn in_progress(&self) -> bool {
        self.kind != Kind::Idle
    }

    /// Parses the next request from `buf`, the connection's unconsumed bytes (the same
    /// bytes as on the previous call, plus any that arrived since, if that returned
    /// `Ok(None)`).
    pub fn parse(&mut self, buf: &[u8], limits: &Limits) -> Result<Option<Request>, ProtocolError> {
        debug_assert!(
            buf.len() >= self.pos && buf.len() >= self.scanned,
            "buffer shrank between calls"
        );
        if self.kind == Kind::Idle {
            match buf.first() {
                None => return Ok(None),
                Some(b'*') => self.kind = Kind::Multibulk,
                Some(_) => self.kind = Kind::Inline,
            }
        }
        let result = match self.kind {
            Kind::Inline => self.parse_inline(buf, limits),
            _ => self.parse_multibulk(buf, limits),
        };
        if !matches!(result, Ok(None)) {
            self.reset();
        }
        result
    }

    /// Searches for `byte` ending the line that starts at `start`, resuming where the last
    /// search stopped. A line longer than `max` is too big.
    fn find_line_end(&mut self, buf: &[u8], start: usize, byte: u8, max: usize) -> Line {
        let window_end = buf.len().min(start.saturating_add(max).saturating_add(1));
        let from = self.scanned.max(start);
        if from < window_end {
            if let Some(i) = memchr(byte, &buf[from..window_end]) {
                self.scanned = from + i;
                return Line::Found(from + i);
            }
        }
        self.scanned = from.max(window_end);
        if buf.len() - start > max {
            Line::TooBig
        } else {
            Line::Incomplete
        }
    }

    fn parse_inline(
        &mut self,
        buf: &[u8],
        limits: &Limits,
    ) -> Result<Option<Request>, ProtocolError> {
        let newline = match self.find_line_end(buf, 0, b'\n', limits.max_inline_len) {
            Line::Found(i) => i,
            Line::Incomplete => return Ok(None),
            Line::TooBig => return Err(ProtocolError::TooBigInline),
        };
        let end = if newline > 0 && buf[newline - 1] == b'\r' {
            newline - 1
        } else {
            newline
        };
        let args = split_args(&buf[..end])?;
        Ok(Some(Request {
            args: RequestArgs::Inline(args),
            consumed: newline + 1,
        }))
    }

    fn parse_multibulk(
        &mut self,
        buf: &[u8],
        limits: &Limits,
    ) -> Result<Option<Request>, ProtocolError> {
        if self.remaining == 0 {
            let cr = match self.find_line_end(buf, 0, b'\r', limits.max_inline_len) {
                Line::Found(i) if i + 2 <= buf.len() => i,
                Line::Found(_) | Line::Incomplete => return Ok(None),
                Line::TooBig => return Err(ProtocolError::TooBigMultibulkCount),
            };
            let count = parse_i64(&buf[1..cr]).ok_or(ProtocolError::InvalidMultibulkLength)?;
            if count > 0 && count as u64 > limits.max_multibulk_len {
                return Err(ProtocolError::InvalidMultibulkLength);
            }
            if count > UNAUTH_MAX_MULTIBULK_LEN && !limits.authenticated {
                return Err(ProtocolError::UnauthenticatedMultibulkLength);
            }
            self.pos = cr + 2;
            if count <= 0 {
                return Ok(Some(Request {
                    args: RequestArgs::Spans(Vec::new()),
                    consumed: self.pos,
                }));
            }
            self.remaining = count as u64;
            let want = self.remaining.min(MAX_PREALLOC_ARGS) as usize;
            self.spans = std::mem::take(&mut self.spare);
            if self.spans.capacity() < want {
                self.spans.reserve_exact(want);
            }
        }
        while self.remaining > 0 {
            let len = match self.bulk_len {
                Some(len) => len,
                None => {
                    let start = self.pos;
                    let cr = match self.find_line_end(buf, start, b'\r', limits.max_inline_len) {
                        Line::Found(i) if i + 2 <= buf.len() => i,
                        Line::Found(_) | Line::Incomplete => return Ok(None),
                        Line::TooBig => return Err(ProtocolError::TooBigBulkCount),
                    };
                    if buf[start] != b'$' {
                        return Err(ProtocolError::ExpectedDollar(buf[start]));
                    }
                    let len = parse_i64(&buf[start + 1..cr])
                        .filter(|&n| n >= 0 && n as u64 <= limits.max_bulk_len)
                        .ok_or(ProtocolError::InvalidBulkLength)?;
                    if len > UNAUTH_MAX_BULK_LEN && !limits.authenticated {
                        return Err(ProtocolError::UnauthenticatedBulkLength);
                    }
                    let len = usize::try_from(len).map_err(|_| ProtocolError::InvalidBulkLength)?;
                    self.pos = cr + 2;
                    self.bulk_len = Some(len);
                    len
                }
            };
            // Like Redis, the two bytes after the payload are skipped, not checked.
            match len.checked_add(2) {
                Some(need) if buf.len() - self.pos >= need => {}
                Some(_) => return Ok(None),
                None => return Err(ProtocolError::InvalidBulkLength),
            }
            self.spans.push(self.pos..self.pos + len);
            self.pos += len + 2;
            self.bulk_len = None;
            self.remaining -= 1;
        }
        Ok(Some(Request {
            args: RequestArgs::Spans(std::mem::take(&mut self.spans)),
            consumed: self.pos,
        }))
    }
}

/// Splits an inline request line like Redis's `sdssplitargs`: whitespace separates
/// arguments; `"..."` understands `\n \r \t \b \a \xHH` and backslash-anything; `'...'` only
/// `\'`; a closing quote must be followed by whitespace or the end; a NUL ends the line.
fn split_args(line: &[u8]) -> Result<Vec<Vec<u8>>, ProtocolError> {
    let line = match memchr(0, line) {
        Some(nul) => &line[..nul],
        None => line,
    };
    // Reading past the end yields NUL, mirroring the C string's terminator.
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && is_c_space(line[i]) {
            i += 1;
        }
        if i >= line.len() {
            return Ok(args);
        }
        let mut current = Vec::new();
        let (mut in_double, mut in_single) = (false, false);
        loop {
            let c = at(i);
            let mut done = false;
            if in_double {
                if c == b'\\' && at(i + 1) == b'x' && is_hex(at(i + 2)) && is_hex(at(i + 3)) {
                    current.push(hex(at(i + 2)) * 16 + hex(at(i + 3)));
                    i += 3;
                } else if c == b'\\' && at(i + 1) != 0 {
                    i += 1;
                    current.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    if at(i + 1) != 0 && !is_c_space(at(i + 1)) {
                        return Err(ProtocolError::UnbalancedQuotes);
                    }
                    done = true;
                } else if c == 0 {
                    return Err(ProtocolError::UnbalancedQuotes);
                } else {
                    current.push(c);
                }
            } else if in_single {
                if c == b'\\' && at(i + 1) == b'\'' {
                    i += 1;
                    current.push(b'\'');
                } else if c == b'\'' {
                    if at(i + 1) != 0 && !is_c_space(at(i + 1)) {
                        return Err(ProtocolError::UnbalancedQuotes);
                    }
                    done = true;
                } else if c == 0 {
                    return Err(ProtocolError::UnbalancedQuotes);
                } else {
                    current.push(c);
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => done = true,
                    b'"' => in_double = true,
                    b'\'' => in_single = true,
                    _ => current.push(c),
                }
            }
            if at(i) != 0 {
                i += 1;
            }
            if done {
                break;
            }
        }
        args.push(current);
    }
}

fn is_hex(c: u8) -> bool {
    c.is_ascii_hexdigit()
}

fn hex(c: u8) -> u8 {
    (c as char).to_digit(16).expect("hex digit") as u8
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::MAX_INLINE_LEN;
    use ProtocolError::*;

    fn parse_all(buf: &[u8], limits: &Limits) -> Result<Option<Request>, ProtocolError> {
        RequestParser::new().parse(buf, limits)
    }

    fn parse(buf: &[u8]) -> Result<Option<Request>, ProtocolError> {
        parse_all(buf, &Limits::default())
    }

    fn unauth() -> Limits {
        Limits {
            authenticated: false,
            ..Limits::default()
        }
    }

    fn inline_args(line: &[u8]) -> Result<Vec<Vec<u8>>, ProtocolError> {
        match parse(line)? {
            Some(Request {
                args: RequestArgs::Inline(a),
                consumed,
            }) => {
                assert_eq!(consumed, line.len());
                Ok(a)
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    fn strs(v: &[&str]) -> Vec<Vec<u8>> {
        v.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn multibulk_spans_point_into_buffer() {
        let buf = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nextra";
        let req = parse(buf).unwrap().unwrap();
        assert_eq!(req.consumed, buf.len() - 5);
        assert_eq!(req.args, RequestArgs::Spans(vec![8..11, 17..18]));
        assert_eq!(req.args.to_slices(buf), vec![&b"GET"[..], b"k"]);
    }

    #[test]
    fn empty_requests_are_skipped() {
        for buf in [&b"*0\r\n"[..], b"*-1\r\n", b"*-5\r\n"] {
            let req = parse(buf).unwrap().unwrap();
            assert!(req.args.is_empty());
            assert_eq!(req.consumed, buf.len());
        }
        for (buf, consumed) in [(&b"\r\n"[..], 2), (b"\n", 1), (b"   \t \r\n", 7)] {
            let req = parse(buf).unwrap().unwrap();
            assert_eq!(req.args, RequestArgs::Inline(vec![]));
            assert_eq!(req.consumed, consumed);
        }
    }

    #[test]
    fn multibulk_errors_have_redis_text() {
        let cases: &[(&[u8], ProtocolError, &str)] = &[
            (
                b"*x\r\n",
                InvalidMultibulkLength,
                "invalid multibulk length",
            ),
            (b"*\r\n", InvalidMultibulkLength, "invalid multibulk length"),
            (
                b"*+1\r\n",
                InvalidMultibulkLength,
                "invalid multibulk length",
            ),
            (
                b"*01\r\n",
                InvalidMultibulkLength,
                "invalid multibulk length",
            ),
            (
                b"*2147483648\r\n",
                InvalidMultibulkLength,
                "invalid multibulk length",
            ),
            (
                b"*99999999999999999999\r\n",
                InvalidMultibulkLength,
                "invalid multibulk length",
            ),
            (b"*1\r\n$x\r\n", InvalidBulkLength, "invalid bulk length"),
            (b"*1\r\n$-1\r\n", InvalidBulkLength, "invalid bulk length"),
            (
                b"*1\r\n$536870913\r\n",
                InvalidBulkLength,
                "invalid bulk length",
            ),
            (
                b"*1\r\n$1099511627776\r\n",
                InvalidBulkLength,
                "invalid bulk length",
            ),
            (
                b"*1\r\n:1\r\n",
                ExpectedDollar(b':'),
                "expected '$', got ':'",
            ),
            (
                b"*2\r\n$1\r\na\r\nfoo\r\n",
                ExpectedDollar(b'f'),
                "expected '$', got 'f'",
            ),
            (
                b"\"foo\r\n",
                UnbalancedQuotes,
                "unbalanced quotes in request",
            ),
        ];
        for (buf, err, text) in cases {
            assert_eq!(
                parse(buf),
                Err(err.clone()),
                "{:?}",
                String::from_utf8_lossy(buf)
            );
            assert_eq!(err.to_string(), format!("Protocol error: {text}"));
        }
    }

    #[test]
    fn max_bulk_len_is_inclusive() {
        let mut buf = b"*1\r\n$536870912\r\n".to_vec();
        assert_eq!(parse(&buf), Ok(None));
        buf.extend_from_slice(b"abc");
        assert_eq!(parse(&buf), Ok(None));
    }

    #[test]
    fn too_big_lines() {
        let mut buf = vec![b'*'];
        buf.resize(MAX_INLINE_LEN, b'1');
        assert_eq!(parse(&buf), Ok(None));
        buf.push(b'1');
        assert_eq!(parse(&buf), Err(TooBigMultibulkCount));

        let mut buf = b"*1\r\n$".to_vec();
        buf.resize(4 + MAX_INLINE_LEN, b'1');
        assert_eq!(parse(&buf), Ok(None));
        buf.push(b'1');
        assert_eq!(parse(&buf), Err(TooBigBulkCount));

        let mut buf = vec![b'a'; MAX_INLINE_LEN];
        assert_eq!(parse(&buf), Ok(None));
        buf.push(b'a');
        assert_eq!(parse(&buf), Err(TooBigInline));
        assert_eq!(
            TooBigInline.to_string(),
            "Protocol error: too big inline request"
        );
        assert_eq!(
            TooBigMultibulkCount.to_string(),
            "Protocol error: too big mbulk count string"
        );
        assert_eq!(
            TooBigBulkCount.to_string(),
            "Protocol error: too big bulk count string"
        );

        // A line of exactly the limit is fine.
        let mut buf = vec![b'a'; MAX_INLINE_LEN];
        buf.push(b'\n');
        assert!(parse(&buf).unwrap().is_some());
    }

    #[test]
    fn unauthenticated_limits() {
        let l = unauth();
        assert_eq!(
            parse_all(b"*11\r\n", &l),
            Err(UnauthenticatedMultibulkLength)
        );
        assert_eq!(parse_all(b"*10\r\n", &l), Ok(None));
        assert_eq!(
            parse_all(b"*1\r\n$16385\r\n", &l),
            Err(UnauthenticatedBulkLength)
        );
        assert_eq!(parse_all(b"*1\r\n$16384\r\n", &l), Ok(None));
        // Invalid beats unauthenticated, as in Redis.
        assert_eq!(
            parse_all(b"*2147483648\r\n", &l),
            Err(InvalidMultibulkLength)
        );
        assert_eq!(
            UnauthenticatedMultibulkLength.to_string(),
            "Protocol error: unauthenticated multibulk length"
        );
        assert_eq!(
            UnauthenticatedBulkLength.to_string(),
            "Protocol error: unauthenticated bulk length"
        );
        // Authenticated: same requests are fine.
        assert_eq!(parse(b"*11\r\n"), Ok(None));
        assert_eq!(parse(b"*1\r\n$16385\r\n"), Ok(None));
    }

    #[test]
    fn huge_declared_count_holds_little_memory() {
        let mut p = RequestParser::new();
        let buf = b"*2147483647\r\n$1\r\na\r\n";
        assert_eq!(p.parse(buf, &Limits::default()), Ok(None));
        assert!(p.in_progress());
        assert!(p.spans.capacity() <= MAX_PREALLOC_ARGS as usize);
        assert_eq!(p.spans.len(), 1);
        assert_eq!(p.remaining, 2147483646);
    }

    #[test]
    fn recycled_spans_are_reused_for_the_next_request() {
        let mut p = RequestParser::new();
        let limits = Limits::default();
        let req = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
        let Some(Request {
            args: RequestArgs::Spans(first),
            ..
        }) = p.parse(req, &limits).unwrap()
        else {
            panic!("no request");
        };
        let at = first.as_ptr();
        p.recycle(first);
        let Some(Request {
            args: RequestArgs::Spans(second),
            ..
        }) = p.parse(req, &limits).unwrap()
        else {
            panic!("no request");
        };
        assert_eq!(second.as_ptr(), at, "the recycled vector was not reused");
        assert_eq!(second, vec![8..11, 17..18]);
        // A vector bigger than the up-front reservation is not kept.
        p.recycle(Vec::with_capacity(MAX_PREALLOC_ARGS as usize + 1));
        assert_eq!(p.spare.capacity(), 0);
    }

    #[test]
    fn huge_bulk_waits_without_allocating() {
        let limits = Limits {
            max_bulk_len: u64::MAX,
            ..Limits::default()
        };
        let mut p = RequestParser::new();
        let buf = b"*1\r\n$1099511627776\r\nabc";
        assert_eq!(p.parse(buf, &limits), Ok(None));
        assert_eq!(p.bulk_len, Some(1 << 40));
        assert!(p.spans.capacity() <= 1);
    }

    #[test]
    fn progress_is_kept_across_calls() {
        let full = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n";
        let mut p = RequestParser::new();
        let limits = Limits::default();
        assert_eq!(p.parse(&full[..0], &limits), Ok(None));
        assert!(!p.in_progress());
        assert_eq!(p.parse(&full[..20], &limits), Ok(None));
        assert!(p.in_progress());
        assert_eq!(p.spans, vec![Range { start: 8, end: 11 }]);
        assert_eq!(p.pos, 17);
        assert_eq!(p.bulk_len, Some(3));
        let req = p.parse(full, &limits).unwrap().unwrap();
        assert!(!p.in_progress());
        assert_eq!(req.consumed, full.len());
        assert_eq!(
            req.args.to_slices(full),
            vec![&b"SET"[..], b"key", b"value"]
        );
    }

    #[test]
    fn payload_terminator_is_not_checked() {
        // Redis skips the two bytes after a payload and after a length line's '\r'.
        let req = parse(b"*1\r\n$3\r\nfooXY").unwrap().unwrap();
        assert_eq!(
            req.args,
            RequestArgs::Spans(vec![Range { start: 8, end: 11 }])
        );
        assert_eq!(req.consumed, 13);
        let req = parse(b"*1\rX$1\rYaZZ").unwrap().unwrap();
        assert_eq!(
            req.args,
            RequestArgs::Spans(vec![Range { start: 8, end: 9 }])
        );
    }

    #[test]
    fn inline_splitting() {
        assert_eq!(
            inline_args(b"SET a b\r\n").unwrap(),
            strs(&["SET", "a", "b"])
        );
        assert_eq!(inline_args(b"  PING  \n").unwrap(), strs(&["PING"]));
        assert_eq!(inline_args(b"a\tb\x0bc\n").unwrap(), strs(&["a", "b\x0bc"]));
        assert_eq!(inline_args(b"a\rb\n").unwrap(), strs(&["a", "b"]));
        assert_eq!(
            inline_args(b"set \"a b\" 'c d'\r\n").unwrap(),
            strs(&["set", "a b", "c d"])
        );
        assert_eq!(
            inline_args(b"\"\\n\\r\\t\\b\\a\\\\\\\"\\q\"\n").unwrap(),
            vec![b"\n\r\t\x08\x07\\\"q".to_vec()]
        );
        assert_eq!(
            inline_args(b"\"\\x41\\x7a\\xff\\x4\"\n").unwrap(),
            vec![b"Az\xffx4".to_vec()]
        );
        assert_eq!(
            inline_args(b"'it\\'s' '\\n'\n").unwrap(),
            strs(&["it's", "\\n"])
        );
        assert_eq!(inline_args(b"\"\" ''\n").unwrap(), strs(&["", ""]));
        assert_eq!(inline_args(b"ab\"c d\"\n").unwrap(), strs(&["abc d"]));
        assert_eq!(inline_args(b"a\0b c\n").unwrap(), strs(&["a"]));
        for bad in [
            &b"\"abc\n"[..],
            b"'abc\n",
            b"\"a\"b\n",
            b"'a'b\n",
            b"\"a\\\"\n",
        ] {
            assert_eq!(
                parse(bad),
                Err(UnbalancedQuotes),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn inline_waits_for_newline() {
        assert_eq!(parse(b"PING"), Ok(None));
        assert_eq!(parse(b"PING\r"), Ok(None));
        let mut p = RequestParser::new();
        let limits = Limits::default();
        assert_eq!(p.parse(b"PI", &limits), Ok(None));
        let req = p.parse(b"PING\nPING\n", &limits).unwrap().unwrap();
        assert_eq!(req.consumed, 5);
        assert_eq!(req.args, RequestArgs::Inline(strs(&["PING"])));
    }
}
