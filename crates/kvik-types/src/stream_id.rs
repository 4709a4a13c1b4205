//! Stream entry IDs as Redis 7.0 parses, orders and generates them (t_stream.c):
//! - [`StreamId`]: `ms-seq`, ordered by `(ms, seq)`, with a 16-byte big-endian form whose byte
//!   order is the ID order (for storage keys).
//! - Parsing: [`parse_id`] (`-`, `+`, `ms`, `ms-seq`), [`parse_strict_id`] (no `-` / `+`, as
//!   XADD, XREAD, XDEL, XACK ...), [`parse_add_id`] (XADD's `*`, `ms-*` and explicit IDs) and
//!   [`parse_range_start`] / [`parse_range_end`] (XRANGE-style bounds with `(` exclusion).
//! - [`next_id`]: the ID XADD assigns given the stream's last ID and the clock, or the error.
//!
//! Numbers follow Redis's `string2ull`: strict decimal first, then C's `strtoull` (leading
//! spaces and a sign accepted), so odd inputs are accepted or refused exactly as Redis does.

use crate::strtol::string2ull;
use std::fmt;

/// A stream entry ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    /// `0-0`, also what `-` means.
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// The largest ID, also what `+` means.
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The next ID (`None` after [`StreamId::MAX`]).
    pub fn incr(self) -> Option<StreamId> {
        match (self.ms, self.seq) {
            (u64::MAX, u64::MAX) => None,
            (ms, u64::MAX) => Some(StreamId::new(ms + 1, 0)),
            (ms, seq) => Some(StreamId::new(ms, seq + 1)),
        }
    }

    /// The previous ID (`None` before [`StreamId::MIN`]).
    pub fn decr(self) -> Option<StreamId> {
        match (self.ms, self.seq) {
            (0, 0) => None,
            (ms, 0) => Some(StreamId::new(ms - 1, u64::MAX)),
            (ms, seq) => Some(StreamId::new(ms, seq - 1)),
        }
    }

    /// Big-endian bytes: ordered as the IDs.
    pub fn to_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.ms.to_be_bytes());
        b[8..].copy_from_slice(&self.seq.to_be_bytes());
        b
    }

    pub fn from_bytes(b: [u8; 16]) -> StreamId {
        StreamId {
            ms: u64::from_be_bytes(b[..8].try_into().expect("8 bytes")),
            seq: u64::from_be_bytes(b[8..].try_into().expect("8 bytes")),
        }
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// Why an ID is refused; `Display` is Redis's reply text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamIdError {
    /// Not an ID where one is expected.
    Invalid,
    /// XADD with an ID not above the stream's last ID.
    EqualOrSmaller,
    /// XADD with the explicit ID 0-0.
    Zero,
    /// XADD on a stream whose last ID is the largest possible.
    Exhausted,
    /// An exclusive start `(MAX`.
    InvalidStart,
    /// An exclusive end `(0-0`.
    InvalidEnd,
}

impl fmt::Display for StreamIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StreamIdError::Invalid => "ERR Invalid stream ID specified as stream command argument",
            StreamIdError::EqualOrSmaller => {
                "ERR The ID specified in XADD is equal or smaller than the target stream top item"
            }
            StreamIdError::Zero => "ERR The ID specified in XADD must be greater than 0-0",
            StreamIdError::Exhausted => {
                "ERR The stream has exhausted the last possible ID, unable to add more items"
            }
            StreamIdError::InvalidStart => "ERR invalid start ID for the interval",
            StreamIdError::InvalidEnd => "ERR invalid end ID for the interval",
        })
    }
}

impl std::error::Error for StreamIdError {}

/// A parsed ID and whether its sequence was given (false for `ms-*`).
struct Parsed {
    id: StreamId,
    seq_given: bool,
}

/// Redis's `streamGenericParseIDOrReply`. `allow_auto_seq` accepts `ms-*` (XADD only).
fn parse_generic(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    allow_auto_seq: bool,
) -> Result<Parsed, StreamIdError> {
    if arg.len() > 127 {
        return Err(StreamIdError::Invalid);
    }
    // Redis works on a C string: the argument ends at its first NUL.
    let arg = match arg.iter().position(|&b| b == 0) {
        Some(nul) => &arg[..nul],
        None => arg,
    };
    match arg {
        b"-" | b"+" if strict => return Err(StreamIdError::Invalid),
        b"-" => {
            return Ok(Parsed {
                id: StreamId::MIN,
                seq_given: true,
            })
        }
        b"+" => {
            return Ok(Parsed {
                id: StreamId::MAX,
                seq_given: true,
            })
        }
        _ => {}
    }
    let (ms_part, seq_part) = match arg.iter().position(|&b| b == b'-') {
        Some(dash) => (&arg[..dash], Some(&arg[dash + 1..])),
        None => (arg, None),
    };
    let ms = string2ull(ms_part).ok_or(StreamIdError::Invalid)?;
    let (seq, seq_given) = match seq_part {
        None => (missing_seq, true),
        Some(b"*") if allow_auto_seq => (0, false),
        Some(s) => (string2ull(s).ok_or(StreamIdError::Invalid)?, true),
    };
    Ok(Parsed {
        id: StreamId::new(ms, seq),
        seq_given,
    })
}

/// An ID where `-` and `+` are allowed; `ms` alone takes `missing_seq`.
pub fn parse_id(arg: &[u8], missing_seq: u64) -> Result<StreamId, StreamIdError> {
    parse_generic(arg, missing_seq, false, false).map(|p| p.id)
}

/// An ID where `-` and `+` are refused (XADD, XREAD, XDEL, XACK, XCLAIM, XSETID, MINID ...).
pub fn parse_strict_id(arg: &[u8], missing_seq: u64) -> Result<StreamId, StreamIdError> {
    parse_generic(arg, missing_seq, true, false).map(|p| p.id)
}

/// XADD's ID argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddId {
    /// `*`: time-based.
    Auto,
    /// `ms-*`: the given time, next sequence.
    AutoSeq(u64),
    /// A full ID (`ms` alone means `ms-0`).
    Explicit(StreamId),
}

/// Parses XADD's ID (refusing `0-0` up front, before the key is looked up, as Redis does).
pub fn parse_add_id(arg: &[u8]) -> Result<AddId, StreamIdError> {
    if arg == b"*" {
        return Ok(AddId::Auto);
    }
    let p = parse_generic(arg, 0, true, true)?;
    if !p.seq_given {
        return Ok(AddId::AutoSeq(p.id.ms));
    }
    if p.id == StreamId::MIN {
        return Err(StreamIdError::Zero);
    }
    Ok(AddId::Explicit(p.id))
}

/// The ID XADD gives a new entry, given the stream's last ID (0-0 for a new stream) and the
/// clock in milliseconds.
pub fn next_id(last: StreamId, add: AddId, now_ms: u64) -> Result<StreamId, StreamIdError> {
    if last == StreamId::MAX {
        return Err(StreamIdError::Exhausted);
    }
    let id = match add {
        AddId::Auto if now_ms > last.ms => StreamId::new(now_ms, 0),
        AddId::Auto => last.incr().ok_or(StreamIdError::EqualOrSmaller)?,
        AddId::AutoSeq(ms) if ms == last.ms => {
            // Redis 7.0 leaves errno unset here, so its reply depends on a stale errno ("equal
            // or smaller" or "Elements are too large to be stored"); later versions, and this
            // function, always give "equal or smaller".
            if last.seq == u64::MAX {
                return Err(StreamIdError::EqualOrSmaller);
            }
            StreamId::new(ms, last.seq + 1)
        }
        AddId::AutoSeq(ms) => StreamId::new(ms, 0),
        AddId::Explicit(id) => id,
    };
    if id <= last {
        return Err(StreamIdError::EqualOrSmaller);
    }
    Ok(id)
}

/// Parses an interval bound: `(` before an ID (longer than just `(`) excludes it, and then `-`
/// and `+` are refused.
fn parse_bound(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool), StreamIdError> {
    if arg.len() > 1 && arg[0] == b'(' {
        Ok((parse_strict_id(&arg[1..], missing_seq)?, true))
    } else {
        Ok((parse_id(arg, missing_seq)?, false))
    }
}

/// The first ID of a range (XRANGE start, XREVRANGE's last argument, XPENDING, XAUTOCLAIM):
/// `ms` alone is `ms-0`; `(id` starts after `id`.
pub fn parse_range_start(arg: &[u8]) -> Result<StreamId, StreamIdError> {
    let (id, exclusive) = parse_bound(arg, 0)?;
    if exclusive {
        id.incr().ok_or(StreamIdError::InvalidStart)
    } else {
        Ok(id)
    }
}

/// The last ID of a range: `ms` alone is `ms-MAX`; `(id` ends before `id`.
pub fn parse_range_end(arg: &[u8]) -> Result<StreamId, StreamIdError> {
    let (id, exclusive) = parse_bound(arg, u64::MAX)?;
    if exclusive {
        id.decr().ok_or(StreamIdError::InvalidEnd)
    } else {
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parse_forms() {
        assert_eq!(parse_id(b"-", 0), Ok(StreamId::MIN));
        assert_eq!(parse_id(b"+", 0), Ok(StreamId::MAX));
        assert_eq!(parse_strict_id(b"+", 0), Err(StreamIdError::Invalid));
        assert_eq!(parse_id(b"5", 7), Ok(StreamId::new(5, 7)));
        assert_eq!(parse_id(b"5-3", 7), Ok(StreamId::new(5, 3)));
        assert_eq!(parse_id(b"5-", 0), Err(StreamIdError::Invalid));
        assert_eq!(parse_id(b"5-*", 0), Err(StreamIdError::Invalid));
        assert_eq!(parse_id(b"-5", 0), Err(StreamIdError::Invalid));
        assert_eq!(parse_id(b"1-2-3", 0), Err(StreamIdError::Invalid));
        assert_eq!(parse_add_id(b"*"), Ok(AddId::Auto));
        assert_eq!(parse_add_id(b"7-*"), Ok(AddId::AutoSeq(7)));
        assert_eq!(parse_add_id(b"0"), Err(StreamIdError::Zero));
        assert_eq!(parse_add_id(b"0-*"), Ok(AddId::AutoSeq(0)));
        assert_eq!(parse_range_start(b"(5-3"), Ok(StreamId::new(5, 4)));
        assert_eq!(parse_range_end(b"(5"), Ok(StreamId::new(5, u64::MAX - 1)));
        assert_eq!(parse_range_end(b"(0-0"), Err(StreamIdError::InvalidEnd));
        assert_eq!(parse_range_start(b"(-"), Err(StreamIdError::Invalid));
        assert_eq!(parse_range_start(b"("), Err(StreamIdError::Invalid));
    }

    #[test]
    fn next_id_rules() {
        let last = StreamId::new(10, 5);
        assert_eq!(next_id(last, AddId::Auto, 20), Ok(StreamId::new(20, 0)));
        assert_eq!(next_id(last, AddId::Auto, 3), Ok(StreamId::new(10, 6)));
        assert_eq!(
            next_id(last, AddId::AutoSeq(10), 0),
            Ok(StreamId::new(10, 6))
        );
        assert_eq!(
            next_id(last, AddId::AutoSeq(11), 0),
            Ok(StreamId::new(11, 0))
        );
        assert_eq!(
            next_id(last, AddId::AutoSeq(9), 0),
            Err(StreamIdError::EqualOrSmaller)
        );
        assert_eq!(
            next_id(last, AddId::Explicit(last), 0),
            Err(StreamIdError::EqualOrSmaller)
        );
        assert_eq!(
            next_id(StreamId::MAX, AddId::Auto, 0),
            Err(StreamIdError::Exhausted)
        );
        assert_eq!(
            next_id(StreamId::new(3, u64::MAX), AddId::AutoSeq(3), 0),
            Err(StreamIdError::EqualOrSmaller)
        );
    }

    proptest! {
        #[test]
        fn bytes_order_is_id_order(a in any::<(u64, u64)>(), b in any::<(u64, u64)>()) {
            let (x, y) = (StreamId::new(a.0, a.1), StreamId::new(b.0, b.1));
            prop_assert_eq!(x.cmp(&y), x.to_bytes().cmp(&y.to_bytes()));
            prop_assert_eq!(StreamId::from_bytes(x.to_bytes()), x);
            prop_assert_eq!(parse_id(x.to_string().as_bytes(), 0), Ok(x));
        }

        #[test]
        fn incr_decr_invert(a in any::<(u64, u64)>()) {
            let x = StreamId::new(a.0, a.1);
            if let Some(n) = x.incr() {
                prop_assert!(n > x);
                prop_assert_eq!(n.decr(), Some(x));
            }
        }
    }
}
