//! BITOP: AND / OR / XOR over values of unequal lengths (shorter ones read as zero-padded)
//! and NOT of a single value, produced window by window so a large result is streamed to the
//! storage layer instead of built whole.

use super::{BitError, BitRead};

/// The four operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

/// The operation argument (any case), checked against the number of sources.
pub fn parse_bitop(op: &[u8], sources: usize) -> Result<BitOp, BitError> {
    const OPS: [(&[u8], BitOp); 4] = [
        (b"and", BitOp::And),
        (b"or", BitOp::Or),
        (b"xor", BitOp::Xor),
        (b"not", BitOp::Not),
    ];
    let op = OPS
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(op))
        .map(|&(_, op)| op)
        .ok_or(BitError::Syntax)?;
    if op == BitOp::Not && sources != 1 {
        return Err(BitError::NotSingleSource);
    }
    Ok(op)
}

/// Bytes combined per window.
pub const WINDOW: usize = 64 * 1024;

/// Runs `op` over `sources` (absent keys passed as empty values) and hands the result to
/// `sink` window by window as `(offset, bytes)`. Returns the result's length, the longest
/// source's; 0 means the destination is to be deleted.
pub fn bitop(op: BitOp, sources: &[&dyn BitRead], sink: &mut dyn FnMut(u64, &[u8])) -> u64 {
    let len = sources.iter().map(|s| s.byte_len()).max().unwrap_or(0);
    let mut out = vec![0u8; WINDOW.min(len as usize)];
    let mut buf = vec![0u8; out.len()];
    let mut offset = 0u64;
    while offset < len {
        let n = (len - offset).min(WINDOW as u64) as usize;
        let (out, buf) = (&mut out[..n], &mut buf[..n]);
        sources[0].read_at(offset, out);
        if op == BitOp::Not {
            out.iter_mut().for_each(|b| *b = !*b);
        }
        for src in &sources[1..] {
            src.read_at(offset, buf);
            let combine = |(o, b): (&mut u8, &u8)| match op {
                BitOp::And => *o &= b,
                BitOp::Or => *o |= b,
                BitOp::Xor => *o ^= b,
                BitOp::Not => unreachable!("NOT has one source"),
            };
            out.iter_mut().zip(buf.iter()).for_each(combine);
        }
        sink(offset, out);
        offset += n as u64;
    }
    len
}

/// [`bitop`] collected into one vector.
pub fn bitop_to_vec(op: BitOp, sources: &[&dyn BitRead]) -> Vec<u8> {
    let mut result = Vec::new();
    bitop(op, sources, &mut |_, bytes| result.extend_from_slice(bytes));
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unequal_lengths_pad_with_zero() {
        let a = vec![0xf0u8, 0xff];
        let b = vec![0x3cu8];
        let empty: Vec<u8> = Vec::new();
        assert_eq!(bitop_to_vec(BitOp::And, &[&a, &b]), vec![0x30, 0x00]);
        assert_eq!(bitop_to_vec(BitOp::Or, &[&a, &b]), vec![0xfc, 0xff]);
        assert_eq!(bitop_to_vec(BitOp::Xor, &[&a, &b]), vec![0xcc, 0xff]);
        assert_eq!(bitop_to_vec(BitOp::Not, &[&b]), vec![0xc3]);
        assert_eq!(bitop_to_vec(BitOp::And, &[&a, &empty]), vec![0, 0]);
        assert_eq!(bitop_to_vec(BitOp::Or, &[&empty]), Vec::<u8>::new());
    }

    #[test]
    fn windows_cover_long_values() {
        let a: Vec<u8> = (0..(WINDOW * 2 + 5)).map(|i| i as u8).collect();
        assert_eq!(bitop_to_vec(BitOp::Not, &[&a]).len(), a.len());
        assert_eq!(parse_bitop(b"NOT", 2), Err(BitError::NotSingleSource));
        assert_eq!(parse_bitop(b"nand", 2), Err(BitError::Syntax));
    }
}
