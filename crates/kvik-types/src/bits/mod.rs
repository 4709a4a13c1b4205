//! Redis 7.0's bit commands (bitops.c) over an abstract byte store, so the storage layer can
//! keep a bitmap in fixed-size segments and still answer exactly as redis-server:
//! - [`store`]: the [`BitRead`] / [`BitWrite`] traits (read and write bytes at an offset, visit
//!   a range as data or zero runs) and their `Vec<u8>` implementation.
//! - SETBIT / GETBIT and the bit-offset argument ([`parse_offset`], [`getbit`], [`setbit`]).
//! - [`count`]: BITCOUNT and BITPOS with BYTE|BIT ranges and Redis's negative-index rules.
//! - [`op`]: BITOP AND / OR / XOR / NOT over values of unequal lengths, streamed in windows.
//! - [`field`]: BITFIELD / BITFIELD_RO: argument parsing, GET / SET / INCRBY and OVERFLOW.
//!
//! Bits are numbered from the most significant bit of byte 0, as in Redis.

pub mod count;
pub mod field;
pub mod op;
pub mod store;

pub use store::{BitRead, BitWrite, Chunk};

use crate::strtol::string2ll;
use std::fmt;

/// Redis's default `proto-max-bulk-len`: bit offsets stay below 8 times this many bytes.
pub const DEFAULT_MAX_BYTES: u64 = 512 * 1024 * 1024;

/// Why a bit command fails; `Display` is Redis's reply text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BitError {
    /// A bit offset that is not an integer, negative, or past the size limit.
    Offset,
    /// SETBIT's value is not 0 or 1.
    BitValue,
    /// BITPOS's bit is not 0 or 1.
    BitArgument,
    /// An integer argument that does not parse.
    NotInteger,
    /// Wrong argument shape.
    Syntax,
    /// BITOP NOT with more than one source.
    NotSingleSource,
    /// A BITFIELD type other than i1..i64 or u1..u63.
    FieldType,
    /// An OVERFLOW mode other than WRAP, SAT, FAIL.
    OverflowType,
    /// BITFIELD_RO given SET or INCRBY.
    ReadOnly,
}

impl fmt::Display for BitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BitError::Offset => "ERR bit offset is not an integer or out of range",
            BitError::BitValue => "ERR bit is not an integer or out of range",
            BitError::BitArgument => "ERR The bit argument must be 1 or 0.",
            BitError::NotInteger => "ERR value is not an integer or out of range",
            BitError::Syntax => "ERR syntax error",
            BitError::NotSingleSource => "ERR BITOP NOT must be called with a single source key.",
            BitError::FieldType => {
                "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is."
            }
            BitError::OverflowType => "ERR Invalid OVERFLOW type specified",
            BitError::ReadOnly => "ERR BITFIELD_RO only supports the GET subcommand",
        })
    }
}

impl std::error::Error for BitError {}

/// An integer argument (`string2ll` rules).
pub(crate) fn parse_i64(arg: &[u8]) -> Result<i64, BitError> {
    string2ll(arg).ok_or(BitError::NotInteger)
}

/// A bit offset argument. With `field_bits` (BITFIELD), `#n` means `n * field_bits`. The
/// offset's byte must stay below `max_bytes` (`proto-max-bulk-len`).
pub fn parse_offset(arg: &[u8], field_bits: Option<u32>, max_bytes: u64) -> Result<u64, BitError> {
    let (digits, scale) = match (arg.first(), field_bits) {
        (Some(b'#'), Some(bits)) if bits > 0 => (&arg[1..], i64::from(bits)),
        _ => (arg, 1),
    };
    let offset = string2ll(digits)
        .ok_or(BitError::Offset)?
        .wrapping_mul(scale);
    if offset < 0 || (offset as u64 >> 3) >= max_bytes {
        return Err(BitError::Offset);
    }
    Ok(offset as u64)
}

/// SETBIT's value argument: "0" or "1".
pub fn parse_bit_value(arg: &[u8]) -> Result<bool, BitError> {
    match string2ll(arg) {
        Some(0) => Ok(false),
        Some(1) => Ok(true),
        _ => Err(BitError::BitValue),
    }
}

/// GETBIT: the bit at `offset` (0 past the end).
pub fn getbit(store: &(impl BitRead + ?Sized), offset: u64) -> u8 {
    let mut b = [0u8; 1];
    store.read_at(offset >> 3, &mut b);
    (b[0] >> (7 - (offset & 7))) & 1
}

/// SETBIT: sets the bit at `offset`, growing the value with zero bytes to reach it. Returns
/// the previous bit.
pub fn setbit(store: &mut (impl BitWrite + ?Sized), offset: u64, on: bool) -> u8 {
    let byte = offset >> 3;
    store.grow_to(byte + 1);
    let mut b = [0u8; 1];
    store.read_at(byte, &mut b);
    let mask = 1u8 << (7 - (offset & 7));
    let old = u8::from(b[0] & mask != 0);
    b[0] = if on { b[0] | mask } else { b[0] & !mask };
    store.write_at(byte, &b);
    old
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets() {
        assert_eq!(parse_offset(b"7", None, DEFAULT_MAX_BYTES), Ok(7));
        assert_eq!(parse_offset(b"#3", Some(8), DEFAULT_MAX_BYTES), Ok(24));
        assert_eq!(
            parse_offset(b"#3", None, DEFAULT_MAX_BYTES),
            Err(BitError::Offset)
        );
        assert_eq!(
            parse_offset(b"-1", None, DEFAULT_MAX_BYTES),
            Err(BitError::Offset)
        );
        assert_eq!(
            parse_offset(b"4294967295", None, DEFAULT_MAX_BYTES),
            Ok(4_294_967_295)
        );
        assert_eq!(
            parse_offset(b"4294967296", None, DEFAULT_MAX_BYTES),
            Err(BitError::Offset)
        );
        assert_eq!(
            parse_offset(b"#67108864", Some(64), DEFAULT_MAX_BYTES),
            Err(BitError::Offset)
        );
    }

    #[test]
    fn segmented_store_handles_the_last_offset_without_materialising() {
        use super::count::{bitcount, bitpos, GivenRange, Unit};
        use super::field;
        let mut seg = store::Segmented::new(64 * 1024);
        let last = DEFAULT_MAX_BYTES * 8 - 1;
        assert_eq!(setbit(&mut seg, last, true), 0);
        assert_eq!(seg.byte_len(), DEFAULT_MAX_BYTES);
        assert_eq!(seg.segments.len(), 1);
        assert_eq!(getbit(&seg, last), 1);
        assert_eq!(bitcount(&seg, None), 1);
        assert_eq!(bitpos(&seg, true, None), last as i64);
        assert_eq!(bitpos(&seg, false, None), 0);
        let tail = Some(GivenRange {
            start: -8,
            end: Some(-1),
            unit: Unit::Bit,
        });
        assert_eq!(bitcount(&seg, tail), 1);
        let ops = field::parse(&[b"INCRBY", b"u8", b"#5", b"7"], false, DEFAULT_MAX_BYTES).unwrap();
        let applied = field::apply(&mut seg, false, &ops);
        assert_eq!(applied.replies, vec![Some(7)]);
        assert_eq!(seg.segments.len(), 2);
    }

    #[test]
    fn setbit_grows_and_returns_old() {
        let mut v: Vec<u8> = Vec::new();
        assert_eq!(setbit(&mut v, 9, true), 0);
        assert_eq!(v, vec![0x00, 0x40]);
        assert_eq!(setbit(&mut v, 9, false), 1);
        assert_eq!(getbit(&v, 9), 0);
        assert_eq!(getbit(&v, 1000), 0);
    }
}
