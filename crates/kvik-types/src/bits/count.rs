//! BITCOUNT and BITPOS: argument parsing, Redis's index rules (negative indexes from the end,
//! clamping, BYTE or BIT units) and the scans, which skip zero runs of segmented stores.
//!
//! Argument order matters for which error wins, so the parsers follow Redis 7.0: BITCOUNT looks
//! the key up first (a missing key answers 0 whatever the range arguments), then parses start,
//! end, unit; BITPOS parses its bit first, then looks the key up, then parses start, unit, end.

use super::{parse_i64, BitError, BitRead, Chunk};
use std::ops::ControlFlow;

/// The unit of a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Byte,
    Bit,
}

/// `BYTE` or `BIT`, any case.
pub fn parse_unit(arg: &[u8]) -> Result<Unit, BitError> {
    if arg.eq_ignore_ascii_case(b"bit") {
        Ok(Unit::Bit)
    } else if arg.eq_ignore_ascii_case(b"byte") {
        Ok(Unit::Byte)
    } else {
        Err(BitError::Syntax)
    }
}

/// A range as given: `start`, optional `end` and the unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GivenRange {
    pub start: i64,
    pub end: Option<i64>,
    pub unit: Unit,
}

/// BITCOUNT's arguments after the key (`[start end [BYTE|BIT]]`); parse them only when the key
/// exists.
pub fn parse_bitcount_args(args: &[&[u8]]) -> Result<Option<GivenRange>, BitError> {
    match args.len() {
        0 => Ok(None),
        2 | 3 => {
            let start = parse_i64(args[0])?;
            let end = parse_i64(args[1])?;
            // Redis answers 0 for two negative indexes in reverse order before it reads the
            // unit; the range below is empty whatever the unit.
            let unit = if start < 0 && end < 0 && start > end {
                Unit::Byte
            } else {
                args.get(2).map_or(Ok(Unit::Byte), |u| parse_unit(u))?
            };
            Ok(Some(GivenRange {
                start,
                end: Some(end),
                unit,
            }))
        }
        _ => Err(BitError::Syntax),
    }
}

/// BITPOS's bit argument.
pub fn parse_bitpos_bit(arg: &[u8]) -> Result<bool, BitError> {
    match parse_i64(arg)? {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(BitError::BitArgument),
    }
}

/// BITPOS's answer for a missing key: an endless run of zeros.
pub fn bitpos_missing(bit: bool) -> i64 {
    if bit {
        -1
    } else {
        0
    }
}

/// BITPOS's arguments after the bit (`[start [end [BYTE|BIT]]]`); parse them only when the key
/// exists.
pub fn parse_bitpos_args(args: &[&[u8]]) -> Result<Option<GivenRange>, BitError> {
    if args.is_empty() {
        return Ok(None);
    }
    if args.len() > 3 {
        return Err(BitError::Syntax);
    }
    let start = parse_i64(args[0])?;
    let unit = args.get(2).map_or(Ok(Unit::Byte), |u| parse_unit(u))?;
    let end = args.get(1).map(|e| parse_i64(e)).transpose()?;
    Ok(Some(GivenRange { start, end, unit }))
}

/// Resolves a range over a value of `len` bytes to inclusive bit positions, or `None` when
/// empty: negative indexes count from the end, then both ends are clamped.
fn resolve(range: GivenRange, len: u64) -> Option<(u64, u64)> {
    let total = match range.unit {
        Unit::Byte => len as i64,
        Unit::Bit => (len as i64) << 3,
    };
    let from_end = |i: i64| if i < 0 { (total + i).max(0) } else { i };
    let start = from_end(range.start);
    let end = from_end(range.end.unwrap_or(total - 1)).min(total - 1);
    if start > end {
        return None;
    }
    let (start, end) = (start as u64, end as u64);
    Some(match range.unit {
        Unit::Byte => (start * 8, end * 8 + 7),
        Unit::Bit => (start, end),
    })
}

/// Mask of the bits of a byte from bit `lo` to bit `hi` (0 = most significant), inclusive.
fn bit_mask(lo: u64, hi: u64) -> u8 {
    let upper = 0xffu8 >> lo;
    let lower = 0xffu8 << (7 - hi);
    upper & lower
}

/// BITCOUNT: set bits in the range (the whole value when `None`).
pub fn bitcount(store: &(impl BitRead + ?Sized), range: Option<GivenRange>) -> u64 {
    let len = store.byte_len();
    let range = range.unwrap_or(GivenRange {
        start: 0,
        end: Some(-1),
        unit: Unit::Byte,
    });
    if range.start < 0 && range.end.is_some_and(|e| e < 0 && range.start > e) {
        return 0;
    }
    let Some((first, last)) = resolve(range, len) else {
        return 0;
    };
    let (first_byte, last_byte) = (first / 8, last / 8);
    let mut count = 0u64;
    store.visit(first_byte, last_byte + 1, &mut |chunk| {
        if let Chunk::Bytes(b) = chunk {
            count += popcount(b);
        }
        ControlFlow::Continue(())
    });
    let mut edge = [0u8; 1];
    store.read_at(first_byte, &mut edge);
    count -= u64::from((edge[0] & !bit_mask(first % 8, 7)).count_ones());
    store.read_at(last_byte, &mut edge);
    count -= u64::from((edge[0] & !bit_mask(0, last % 8)).count_ones());
    count
}

fn popcount(bytes: &[u8]) -> u64 {
    let mut words = bytes.chunks_exact(8);
    let mut n: u64 = words
        .by_ref()
        .map(|w| u64::from(u64::from_ne_bytes(w.try_into().expect("8 bytes")).count_ones()))
        .sum();
    n += words
        .remainder()
        .iter()
        .map(|b| u64::from(b.count_ones()))
        .sum::<u64>();
    n
}

/// First bit equal to `bit` in one byte between bits `lo` and `hi`.
fn find_in_byte(byte: u8, bit: bool, lo: u64, hi: u64) -> Option<u64> {
    let b = if bit { byte } else { !byte } & bit_mask(lo, hi);
    (b != 0).then(|| u64::from(b.leading_zeros()))
}

/// BITPOS on an existing value: the first bit equal to `bit` in the range, else -1, except that
/// a clear bit searched without an explicit end is found just past the value, as Redis does.
pub fn bitpos(store: &(impl BitRead + ?Sized), bit: bool, range: Option<GivenRange>) -> i64 {
    let len = store.byte_len();
    let end_given = range.is_some_and(|r| r.end.is_some());
    let range = range.unwrap_or(GivenRange {
        start: 0,
        end: None,
        unit: Unit::Byte,
    });
    let Some((first, last)) = resolve(range, len) else {
        return -1;
    };
    let (first_byte, last_byte) = (first / 8, last / 8);
    let mut edge = [0u8; 1];
    store.read_at(first_byte, &mut edge);
    let hi = if first_byte == last_byte { last % 8 } else { 7 };
    if let Some(p) = find_in_byte(edge[0], bit, first % 8, hi) {
        return (first_byte * 8 + p) as i64;
    }
    if first_byte < last_byte {
        let mut found = None;
        let mut pos = first_byte + 1;
        store.visit(first_byte + 1, last_byte, &mut |chunk| {
            match chunk {
                Chunk::Zeros(n) => {
                    if !bit && n > 0 {
                        found = Some(pos * 8);
                        return ControlFlow::Break(());
                    }
                }
                Chunk::Bytes(b) => {
                    let skip = if bit { 0x00 } else { 0xff };
                    if let Some(i) = b.iter().position(|&x| x != skip) {
                        let p = find_in_byte(b[i], bit, 0, 7).expect("a differing byte");
                        found = Some((pos + i as u64) * 8 + p);
                        return ControlFlow::Break(());
                    }
                }
            }
            pos += chunk.len();
            ControlFlow::Continue(())
        });
        if let Some(p) = found {
            return p as i64;
        }
        store.read_at(last_byte, &mut edge);
        if let Some(p) = find_in_byte(edge[0], bit, 0, last % 8) {
            return (last_byte * 8 + p) as i64;
        }
    }
    if !bit && !end_given {
        ((last_byte + 1) * 8) as i64
    } else {
        -1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bits::store::Segmented;
    use crate::bits::BitWrite;
    use proptest::prelude::*;

    fn r(start: i64, end: Option<i64>, unit: Unit) -> Option<GivenRange> {
        Some(GivenRange { start, end, unit })
    }

    #[test]
    fn redis_doc_examples() {
        let v = b"foobar".to_vec();
        assert_eq!(bitcount(&v, None), 26);
        assert_eq!(bitcount(&v, r(0, Some(0), Unit::Byte)), 4);
        assert_eq!(bitcount(&v, r(1, Some(1), Unit::Byte)), 6);
        assert_eq!(bitcount(&v, r(5, Some(30), Unit::Bit)), 17);
        let v = vec![0xff, 0xf0, 0x00];
        assert_eq!(bitpos(&v, false, None), 12);
        let v = vec![0x00, 0xff, 0xf0];
        assert_eq!(bitpos(&v, true, r(0, None, Unit::Byte)), 8);
        assert_eq!(bitpos(&v, true, r(2, None, Unit::Byte)), 16);
        assert_eq!(bitpos(&v, true, r(2, Some(-1), Unit::Byte)), 16);
        assert_eq!(bitpos(&v, true, r(7, Some(15), Unit::Bit)), 8);
        assert_eq!(bitpos(&v, true, r(7, Some(-3), Unit::Bit)), 8);
        let v = vec![0xff, 0xff];
        assert_eq!(bitpos(&v, false, None), 16);
        assert_eq!(bitpos(&v, false, r(0, Some(-1), Unit::Byte)), -1);
    }

    /// The plain definition: bits of the resolved range, one by one.
    fn naive_bits(v: &[u8], range: Option<GivenRange>) -> Vec<(u64, bool)> {
        let range = range.unwrap_or(GivenRange {
            start: 0,
            end: None,
            unit: Unit::Byte,
        });
        match resolve(range, v.len() as u64) {
            None => vec![],
            Some((a, b)) => (a..=b)
                .map(|i| (i, v[(i / 8) as usize] >> (7 - i % 8) & 1 == 1))
                .collect(),
        }
    }

    fn arb_range() -> impl Strategy<Value = Option<GivenRange>> {
        proptest::option::of(
            (-80i64..80, proptest::option::of(-80i64..80), any::<bool>()).prop_map(
                |(s, e, bit)| GivenRange {
                    start: s,
                    end: e,
                    unit: if bit { Unit::Bit } else { Unit::Byte },
                },
            ),
        )
    }

    proptest! {
        #[test]
        fn count_and_pos_match_definition(
            v in proptest::collection::vec(prop_oneof![Just(0u8), Just(0xffu8), any::<u8>()], 0..12),
            range in arb_range(),
            bit in any::<bool>(),
        ) {
            let bits = naive_bits(&v, range);
            let count_range = range.map(|r| GivenRange { end: Some(r.end.unwrap_or(-1)), ..r });
            let skip = count_range.is_some_and(|r| r.start < 0 && r.end.unwrap() < 0 && r.start > r.end.unwrap());
            let expected_count = if skip { 0 } else {
                naive_bits(&v, count_range).iter().filter(|(_, b)| *b).count() as u64
            };
            prop_assert_eq!(bitcount(&v, count_range), expected_count);
            let found = bits.iter().find(|(_, b)| *b == bit).map(|(i, _)| *i as i64);
            let end_given = range.is_some_and(|r| r.end.is_some());
            let expected_pos = match found {
                Some(p) => p,
                None if !bit && !end_given && !bits.is_empty() => v.len() as i64 * 8,
                None => -1,
            };
            prop_assert_eq!(bitpos(&v, bit, range), expected_pos);
            // The segmented store answers the same.
            let mut seg = Segmented::new(3);
            seg.grow_to(v.len() as u64);
            for (i, &b) in v.iter().enumerate() {
                if b != 0 {
                    seg.write_at(i as u64, &[b]);
                }
            }
            prop_assert_eq!(bitcount(&seg, count_range), expected_count);
            prop_assert_eq!(bitpos(&seg, bit, range), expected_pos);
        }
    }
}
