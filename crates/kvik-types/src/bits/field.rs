//! BITFIELD and BITFIELD_RO: parsing of the subcommand list (types i1..i64 and u1..u63,
//! offsets with the `#n` form, OVERFLOW WRAP|SAT|FAIL applying to the operations after it) and
//! their execution on a byte store with Redis's overflow arithmetic.
//!
//! Redis answers every operation in order: GET its value, SET the old value, INCRBY the new
//! one, or nil when an OVERFLOW FAIL operation would overflow (nothing written then).

use super::{parse_i64, parse_offset, BitError, BitRead, BitWrite};
use crate::strtol::string2ll;

/// A field type: signed or not, and its width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldType {
    pub signed: bool,
    pub bits: u32,
}

/// `i1`..`i64` or `u1`..`u63` (lower-case prefix only, as Redis 7.0).
pub fn parse_type(arg: &[u8]) -> Result<FieldType, BitError> {
    let arg = match arg.iter().position(|&b| b == 0) {
        Some(nul) => &arg[..nul],
        None => arg,
    };
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(BitError::FieldType),
    };
    let bits = string2ll(&arg[1..]).ok_or(BitError::FieldType)?;
    let max = if signed { 64 } else { 63 };
    if !(1..=max).contains(&bits) {
        return Err(BitError::FieldType);
    }
    Ok(FieldType {
        signed,
        bits: bits as u32,
    })
}

/// What happens when SET or INCRBY leaves the type's range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// One operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldAction {
    Get,
    Set(i64),
    IncrBy(i64),
}

/// One parsed operation with its type, bit offset and the overflow mode in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldOp {
    pub action: FieldAction,
    pub ty: FieldType,
    pub offset: u64,
    pub overflow: Overflow,
}

/// Parses BITFIELD's (or, with `read_only`, BITFIELD_RO's) arguments after the key.
/// `max_bytes` is `proto-max-bulk-len`. BITFIELD_RO's SET/INCRBY error comes after the whole
/// list parsed, as in Redis.
pub fn parse(args: &[&[u8]], read_only: bool, max_bytes: u64) -> Result<Vec<FieldOp>, BitError> {
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 0;
    while j < args.len() {
        let remaining = args.len() - j - 1;
        let sub = args[j];
        let action_arity = if sub.eq_ignore_ascii_case(b"get") && remaining >= 2 {
            2
        } else if (sub.eq_ignore_ascii_case(b"set") || sub.eq_ignore_ascii_case(b"incrby"))
            && remaining >= 3
        {
            3
        } else if sub.eq_ignore_ascii_case(b"overflow") && remaining >= 1 {
            const MODES: [(&[u8], Overflow); 3] = [
                (b"wrap", Overflow::Wrap),
                (b"sat", Overflow::Sat),
                (b"fail", Overflow::Fail),
            ];
            overflow = MODES
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(args[j + 1]))
                .map(|&(_, m)| m)
                .ok_or(BitError::OverflowType)?;
            j += 2;
            continue;
        } else {
            return Err(BitError::Syntax);
        };
        let ty = parse_type(args[j + 1])?;
        let offset = parse_offset(args[j + 2], Some(ty.bits), max_bytes)?;
        let action = if action_arity == 2 {
            FieldAction::Get
        } else {
            let n = parse_i64(args[j + 3])?;
            if sub.eq_ignore_ascii_case(b"set") {
                FieldAction::Set(n)
            } else {
                FieldAction::IncrBy(n)
            }
        };
        ops.push(FieldOp {
            action,
            ty,
            offset,
            overflow,
        });
        j += action_arity + 1;
    }
    if read_only && !is_read_only(&ops) {
        return Err(BitError::ReadOnly);
    }
    Ok(ops)
}

/// Whether every operation is a GET (then Redis reads without creating the key).
pub fn is_read_only(ops: &[FieldOp]) -> bool {
    ops.iter().all(|op| op.action == FieldAction::Get)
}

/// The byte length a value must have before the writes run: the last byte any SET or INCRBY
/// touches, plus one.
pub fn needed_len(ops: &[FieldOp]) -> Option<u64> {
    ops.iter()
        .filter(|op| op.action != FieldAction::Get)
        .map(|op| ((op.offset + u64::from(op.ty.bits) - 1) >> 3) + 1)
        .max()
}

/// Reads `bits` bits at bit `offset` as an unsigned value.
fn read_unsigned(store: &(impl BitRead + ?Sized), offset: u64, bits: u32) -> u64 {
    let mut buf = [0u8; 9];
    store.read_at(offset >> 3, &mut buf);
    let shift = (offset & 7) as u32;
    let wide = u128::from_be_bytes({
        let mut w = [0u8; 16];
        w[..9].copy_from_slice(&buf);
        w
    });
    // The field starts `shift` bits into the 128-bit word and is `bits` long.
    ((wide << shift) >> (128 - bits)) as u64
}

fn read_signed(store: &(impl BitRead + ?Sized), offset: u64, bits: u32) -> i64 {
    let v = read_unsigned(store, offset, bits);
    if bits < 64 && v & (1 << (bits - 1)) != 0 {
        (v | (u64::MAX << bits)) as i64
    } else {
        v as i64
    }
}

fn write_bits(store: &mut (impl BitWrite + ?Sized), offset: u64, bits: u32, value: u64) {
    let first = offset >> 3;
    let last = (offset + u64::from(bits) - 1) >> 3;
    let n = (last - first + 1) as usize;
    let mut buf = [0u8; 9];
    store.read_at(first, &mut buf[..n]);
    let mut w = [0u8; 16];
    w[..9].copy_from_slice(&buf);
    let mut wide = u128::from_be_bytes(w);
    let shift = 128 - (offset & 7) as u32 - bits;
    let mask = (u128::MAX >> (128 - bits)) << shift;
    let v = u128::from(value) & (u128::MAX >> (128 - bits));
    wide = (wide & !mask) | (v << shift);
    store.write_at(first, &wide.to_be_bytes()[..n]);
}

/// Redis's signed overflow check: `Some(result)` to store (wrapped or saturated), `None` on
/// FAIL; `overflowed` tells whether the plain sum left the range.
fn signed_add(value: i64, incr: i64, bits: u32, mode: Overflow) -> Option<i64> {
    let max: i64 = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let wrap = || {
        let mut c = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let mask = u64::MAX << bits;
            if c & (1u64 << (bits - 1)) != 0 {
                c |= mask;
            } else {
                c &= !mask;
            }
        }
        c as i64
    };
    let over = value > max
        || (bits != 64 && incr > max_incr)
        || (value >= 0 && incr > 0 && incr > max_incr);
    let under = !over
        && (value < min
            || (bits != 64 && incr < min_incr)
            || (value < 0 && incr < 0 && incr < min_incr));
    match (over || under, mode) {
        (false, _) => Some(value.wrapping_add(incr)),
        (true, Overflow::Wrap) => Some(wrap()),
        (true, Overflow::Sat) => Some(if over { max } else { min }),
        (true, Overflow::Fail) => None,
    }
}

/// Redis's unsigned overflow check, as [`signed_add`].
fn unsigned_add(value: u64, incr: i64, bits: u32, mode: Overflow) -> Option<u64> {
    let max: u64 = (1u64 << bits) - 1;
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = (value as i64).wrapping_neg();
    let over = value > max || (incr > 0 && incr > max_incr);
    let under = !over && incr < 0 && incr < min_incr;
    let wrap = || value.wrapping_add(incr as u64) & !(u64::MAX << bits);
    match (over || under, mode) {
        (false, _) => Some(value.wrapping_add(incr as u64)),
        (true, Overflow::Wrap) => Some(wrap()),
        (true, Overflow::Sat) => Some(if over { max } else { 0 }),
        (true, Overflow::Fail) => None,
    }
}

/// BITFIELD_RO, or BITFIELD whose operations are all GETs: the values read (a missing key is
/// an empty value).
pub fn read(store: &(impl BitRead + ?Sized), ops: &[FieldOp]) -> Vec<Option<i64>> {
    ops.iter().map(|op| Some(get(store, op))).collect()
}

fn get(store: &(impl BitRead + ?Sized), op: &FieldOp) -> i64 {
    if op.ty.signed {
        read_signed(store, op.offset, op.ty.bits)
    } else {
        read_unsigned(store, op.offset, op.ty.bits) as i64
    }
}

/// What a writing BITFIELD did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// One reply per operation; `None` is nil (OVERFLOW FAIL).
    pub replies: Vec<Option<i64>>,
    /// Operations that counted as changes (Redis's dirty count; notify "setbit" when > 0).
    pub changes: u64,
}

/// BITFIELD with at least one SET or INCRBY. The value (an empty one for a missing key, then
/// `created`) is first grown to [`needed_len`], as Redis does even when every write then
/// fails; the caller stores it when it was created, grown or changed.
pub fn apply(store: &mut (impl BitWrite + ?Sized), created: bool, ops: &[FieldOp]) -> Applied {
    let before = store.byte_len();
    if let Some(len) = needed_len(ops) {
        store.grow_to(len);
    }
    let dirty = created || store.byte_len() != before;
    let mut replies = Vec::with_capacity(ops.len());
    let mut changes = 0;
    for op in ops {
        let (bits, mode) = (op.ty.bits, op.overflow);
        let outcome = match op.action {
            FieldAction::Get => {
                replies.push(Some(get(store, op)));
                continue;
            }
            FieldAction::Set(v) | FieldAction::IncrBy(v) if op.ty.signed => {
                let old = read_signed(store, op.offset, bits);
                let is_set = matches!(op.action, FieldAction::Set(_));
                let new = if is_set {
                    signed_add(v, 0, bits, mode)
                } else {
                    signed_add(old, v, bits, mode)
                };
                new.map(|n| (old as u64, n as u64, if is_set { old } else { n }))
            }
            FieldAction::Set(v) | FieldAction::IncrBy(v) => {
                let old = read_unsigned(store, op.offset, bits);
                let is_set = matches!(op.action, FieldAction::Set(_));
                let new = if is_set {
                    unsigned_add(v as u64, 0, bits, mode)
                } else {
                    unsigned_add(old, v, bits, mode)
                };
                new.map(|n| (old, n, if is_set { old as i64 } else { n as i64 }))
            }
        };
        match outcome {
            Some((old, new, reply)) => {
                write_bits(store, op.offset, bits, new);
                if dirty || old != new {
                    changes += 1;
                }
                replies.push(Some(reply));
            }
            None => replies.push(None),
        }
    }
    Applied { replies, changes }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bits::DEFAULT_MAX_BYTES;

    fn ops(args: &[&str]) -> Result<Vec<FieldOp>, BitError> {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        parse(&a, false, DEFAULT_MAX_BYTES)
    }

    #[test]
    fn parse_errors_in_redis_order() {
        assert_eq!(ops(&["get"]), Err(BitError::Syntax));
        assert_eq!(ops(&["get", "u8"]), Err(BitError::Syntax));
        assert_eq!(
            ops(&["overflow", "foo", "get", "u8", "0"]),
            Err(BitError::OverflowType)
        );
        assert_eq!(ops(&["get", "u64", "0"]), Err(BitError::FieldType));
        assert_eq!(ops(&["get", "i0", "0"]), Err(BitError::FieldType));
        assert_eq!(ops(&["set", "u8", "a", "1"]), Err(BitError::Offset));
        assert_eq!(ops(&["set", "u8", "0", "a"]), Err(BitError::NotInteger));
        assert_eq!(ops(&["get", "u8", "#2"]).unwrap()[0].offset, 16);
        let ro: Vec<&[u8]> = vec![b"set", b"u8", b"0", b"1"];
        assert_eq!(parse(&ro, true, DEFAULT_MAX_BYTES), Err(BitError::ReadOnly));
    }

    #[test]
    fn redis_doc_examples() {
        let mut v: Vec<u8> = Vec::new();
        let a = apply(
            &mut v,
            true,
            &ops(&["incrby", "i5", "100", "1", "get", "u4", "0"]).unwrap(),
        );
        assert_eq!(a.replies, vec![Some(1), Some(0)]);
        let mut v: Vec<u8> = Vec::new();
        let script = [
            "incrby", "u2", "100", "1", "overflow", "sat", "incrby", "u2", "102", "1",
        ];
        let mut out = Vec::new();
        for _ in 0..4 {
            out.push(apply(&mut v, false, &ops(&script).unwrap()).replies);
        }
        assert_eq!(out[3], vec![Some(0), Some(3)]);
        let mut v: Vec<u8> = Vec::new();
        let fail = ops(&["overflow", "fail", "incrby", "u2", "102", "5"]).unwrap();
        let a = apply(&mut v, true, &fail);
        assert_eq!(a.replies, vec![None]);
        assert_eq!(v.len(), 13);
    }

    #[test]
    fn overflow_arithmetic() {
        assert_eq!(signed_add(127, 1, 8, Overflow::Wrap), Some(-128));
        assert_eq!(signed_add(127, 1, 8, Overflow::Sat), Some(127));
        assert_eq!(signed_add(-128, -1, 8, Overflow::Sat), Some(-128));
        assert_eq!(signed_add(i64::MAX, 1, 64, Overflow::Wrap), Some(i64::MIN));
        assert_eq!(signed_add(i64::MIN, -1, 64, Overflow::Fail), None);
        assert_eq!(unsigned_add(255, 1, 8, Overflow::Wrap), Some(0));
        assert_eq!(unsigned_add(0, -1, 8, Overflow::Sat), Some(0));
        assert_eq!(unsigned_add(u64::MAX, 0, 8, Overflow::Sat), Some(255));
        assert_eq!(unsigned_add(5, -6, 8, Overflow::Wrap), Some(255));
    }

    #[test]
    fn bits_roundtrip_at_every_alignment() {
        for offset in 0..16u64 {
            for bits in [1u32, 5, 8, 13, 63, 64] {
                let mut v = vec![0xa5u8; 12];
                let value = 0x0123_4567_89ab_cdefu64 & (u64::MAX >> (64 - bits));
                write_bits(&mut v, offset, bits, value);
                assert_eq!(read_unsigned(&v, offset, bits), value, "{offset} {bits}");
                // Neighbouring bits untouched.
                if offset > 0 {
                    assert_eq!(
                        read_unsigned(&v, 0, offset as u32),
                        read_unsigned(&vec![0xa5u8; 12], 0, offset as u32)
                    );
                }
            }
        }
    }
}
