//! Range arguments of the sorted-set commands: score intervals (`1`, `(1.5`, `-inf`, `+inf`)
//! and lexicographic intervals (`[a`, `(a`, `-`, `+`), parsed and compared as Redis 7.0 does
//! (`zslParseRange`, `zslParseLexRange`), plus the index sanitising of rank ranges.

use crate::cmd::ctx::CmdError;
use kvik_resp::parse_redis_double;
use std::cmp::Ordering;

pub const ERR_NOT_FLOAT_RANGE: CmdError = CmdError::fixed("min or max is not a float");
pub const ERR_NOT_LEX_RANGE: CmdError = CmdError::fixed("min or max not valid string range item");

/// A score interval; either end may be exclusive.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreRange {
    pub min: f64,
    pub max: f64,
    pub minex: bool,
    pub maxex: bool,
}

/// C's `strtod` over the whole argument, as `zslParseRange` uses it: leading white space is
/// skipped, an empty string reads as 0, overflow gives an infinity and underflow 0; trailing
/// bytes and NaN are refused.
fn strtod_whole(b: &[u8]) -> Option<f64> {
    let start = b
        .iter()
        .position(|&c| !matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
        .unwrap_or(b.len());
    let b = &b[start..];
    if b.is_empty() {
        return Some(0.0);
    }
    if let Some(v) = parse_redis_double(b) {
        return Some(v);
    }
    // What getDouble refuses but strtod accepts: out-of-range decimals.
    let v: f64 = std::str::from_utf8(b).ok()?.parse().ok()?;
    (!v.is_nan()).then_some(v)
}

impl ScoreRange {
    /// Parses `min` and `max` ("ERR min or max is not a float").
    pub fn parse(min: &[u8], max: &[u8]) -> Result<ScoreRange, CmdError> {
        let item = |b: &[u8]| -> Result<(f64, bool), CmdError> {
            let (ex, text) = match b.first() {
                Some(b'(') => (true, &b[1..]),
                _ => (false, b),
            };
            strtod_whole(text)
                .map(|v| (v, ex))
                .ok_or(ERR_NOT_FLOAT_RANGE)
        };
        let (min, minex) = item(min)?;
        let (max, maxex) = item(max)?;
        Ok(ScoreRange {
            min,
            max,
            minex,
            maxex,
        })
    }

    /// True if no score can be in the range.
    pub fn is_empty(&self) -> bool {
        self.min > self.max || (self.min == self.max && (self.minex || self.maxex))
    }

    /// True if every score is at or above the start (`-inf`, inclusive).
    pub fn open_below(&self) -> bool {
        self.min == f64::NEG_INFINITY && !self.minex
    }

    /// True if every score is at or below the end (`+inf`, inclusive).
    pub fn open_above(&self) -> bool {
        self.max == f64::INFINITY && !self.maxex
    }

    pub fn gte_min(&self, v: f64) -> bool {
        if self.minex {
            v > self.min
        } else {
            v >= self.min
        }
    }

    pub fn lte_max(&self, v: f64) -> bool {
        if self.maxex {
            v < self.max
        } else {
            v <= self.max
        }
    }
}

/// One end of a lexicographic interval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LexBound {
    /// `-`: below every member.
    Min,
    /// `+`: above every member.
    Max,
    /// `[member`
    Incl(Vec<u8>),
    /// `(member`
    Excl(Vec<u8>),
}

impl LexBound {
    fn parse(b: &[u8]) -> Result<LexBound, CmdError> {
        match b {
            b"-" => Ok(LexBound::Min),
            b"+" => Ok(LexBound::Max),
            [b'[', rest @ ..] => Ok(LexBound::Incl(rest.to_vec())),
            [b'(', rest @ ..] => Ok(LexBound::Excl(rest.to_vec())),
            _ => Err(ERR_NOT_LEX_RANGE),
        }
    }

    /// The bound's value compared with `member` (`-` below everything, `+` above).
    fn cmp_member(&self, member: &[u8]) -> Ordering {
        match self {
            LexBound::Min => Ordering::Less,
            LexBound::Max => Ordering::Greater,
            LexBound::Incl(v) | LexBound::Excl(v) => v.as_slice().cmp(member),
        }
    }

    /// `-` and `+` count as exclusive, as in Redis.
    fn exclusive(&self) -> bool {
        !matches!(self, LexBound::Incl(_))
    }

    /// The member bytes of a `[`/`(` bound.
    pub fn value(&self) -> Option<&[u8]> {
        match self {
            LexBound::Incl(v) | LexBound::Excl(v) => Some(v),
            _ => None,
        }
    }
}

/// A lexicographic interval (ZRANGEBYLEX and friends).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexRange {
    pub min: LexBound,
    pub max: LexBound,
}

impl LexRange {
    /// Parses `min` and `max` ("ERR min or max not valid string range item").
    pub fn parse(min: &[u8], max: &[u8]) -> Result<LexRange, CmdError> {
        Ok(LexRange {
            min: LexBound::parse(min)?,
            max: LexBound::parse(max)?,
        })
    }

    /// True if no member can be in the range.
    pub fn is_empty(&self) -> bool {
        let cmp = match (&self.min, &self.max) {
            (LexBound::Min, LexBound::Min) | (LexBound::Max, LexBound::Max) => Ordering::Equal,
            (LexBound::Min, _) | (_, LexBound::Max) => Ordering::Less,
            (LexBound::Max, _) | (_, LexBound::Min) => Ordering::Greater,
            (a, b) => a.value().cmp(&b.value()),
        };
        cmp == Ordering::Greater
            || (cmp == Ordering::Equal && (self.min.exclusive() || self.max.exclusive()))
    }

    pub fn gte_min(&self, member: &[u8]) -> bool {
        match self.min.cmp_member(member) {
            Ordering::Less => true,
            Ordering::Equal => !self.min.exclusive(),
            Ordering::Greater => false,
        }
    }

    pub fn lte_max(&self, member: &[u8]) -> bool {
        match self.max.cmp_member(member) {
            Ordering::Greater => true,
            Ordering::Equal => !self.max.exclusive(),
            Ordering::Less => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_ranges_parse_like_strtod() {
        let r = ScoreRange::parse(b"(1.5", b"+inf").unwrap();
        assert!(r.minex && !r.maxex && r.min == 1.5 && r.max == f64::INFINITY);
        assert!(!r.gte_min(1.5) && r.gte_min(1.6) && r.lte_max(f64::INFINITY));
        assert_eq!(ScoreRange::parse(b"", b"(").unwrap().min, 0.0);
        assert_eq!(
            ScoreRange::parse(b" 1", b"1e400").unwrap().max,
            f64::INFINITY
        );
        assert_eq!(ScoreRange::parse(b"0x10", b"1").unwrap().min, 16.0);
        for bad in [&b"nan"[..], b"(nan", b"1x", b"x", b"1 "] {
            assert_eq!(
                ScoreRange::parse(bad, b"1"),
                Err(ERR_NOT_FLOAT_RANGE),
                "{bad:?}"
            );
        }
        assert!(ScoreRange::parse(b"(1", b"1").unwrap().is_empty());
        assert!(ScoreRange::parse(b"2", b"1").unwrap().is_empty());
        assert!(!ScoreRange::parse(b"1", b"1").unwrap().is_empty());
    }

    #[test]
    fn lex_ranges_follow_redis() {
        for bad in [&b""[..], b"a", b"++", b"--"] {
            assert_eq!(LexRange::parse(bad, b"+"), Err(ERR_NOT_LEX_RANGE));
        }
        let r = LexRange::parse(b"(b", b"[d").unwrap();
        assert!(!r.gte_min(b"b") && r.gte_min(b"ba") && r.lte_max(b"d") && !r.lte_max(b"da"));
        assert!(LexRange::parse(b"+", b"+").unwrap().is_empty());
        assert!(LexRange::parse(b"-", b"-").unwrap().is_empty());
        assert!(LexRange::parse(b"+", b"-").unwrap().is_empty());
        assert!(!LexRange::parse(b"-", b"+").unwrap().is_empty());
        assert!(LexRange::parse(b"(a", b"[a").unwrap().is_empty());
        assert!(!LexRange::parse(b"[a", b"[a").unwrap().is_empty());
        assert!(LexRange::parse(b"[b", b"[a").unwrap().is_empty());
    }
}
