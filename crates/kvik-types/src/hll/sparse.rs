//! The sparse representation: a run-length sequence of opcodes after the header.
//!
//! - ZERO  `00xxxxxx`: 1..=64 registers set to 0.
//! - XZERO `01xxxxxx yyyyyyyy`: 1..=16384 registers set to 0 (14-bit length, big endian).
//! - VAL   `1vvvvvxx`: 1..=4 registers set to 1..=32.
//!
//! Updates are done in place exactly as Redis does them (split the covering opcode into at most
//! three, then merge equal adjacent VALs among the next five opcodes), so the bytes match.

use super::{dense, HllError, REGISTERS};

/// Longest run a ZERO opcode holds.
pub const ZERO_MAX_LEN: usize = 64;
/// Longest run an XZERO opcode holds.
pub const XZERO_MAX_LEN: usize = 16384;
/// Highest register value a VAL opcode holds; a higher count forces the dense representation.
pub const VAL_MAX_VALUE: u8 = 32;
/// Longest run a VAL opcode holds.
pub const VAL_MAX_LEN: usize = 4;

/// One decoded opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `len` zero registers, one byte.
    Zero(usize),
    /// `len` zero registers, two bytes.
    XZero(usize),
    /// `len` registers of `value`.
    Val { value: u8, len: usize },
}

impl Op {
    /// Decodes the opcode at `ops[0]`. A truncated XZERO reads its second byte as 0 (Redis reads
    /// the string terminator there); the walk then fails its register-count check.
    pub fn decode(ops: &[u8]) -> Op {
        let b = ops[0];
        if b & 0xc0 == 0 {
            Op::Zero(usize::from(b & 0x3f) + 1)
        } else if b & 0xc0 == 0x40 {
            let lo = usize::from(ops.get(1).copied().unwrap_or(0));
            Op::XZero(((usize::from(b & 0x3f) << 8) | lo) + 1)
        } else {
            Op::Val {
                value: ((b >> 2) & 0x1f) + 1,
                len: usize::from(b & 3) + 1,
            }
        }
    }

    /// Registers covered.
    pub fn span(self) -> usize {
        match self {
            Op::Zero(n) | Op::XZero(n) => n,
            Op::Val { len, .. } => len,
        }
    }

    /// Bytes taken.
    pub fn byte_len(self) -> usize {
        match self {
            Op::XZero(_) => 2,
            _ => 1,
        }
    }

    /// Appends the encoding (lengths and values must be in the opcode's range).
    pub fn encode(self, out: &mut Vec<u8>) {
        match self {
            Op::Zero(n) => out.push((n - 1) as u8),
            Op::XZero(n) => {
                let n = n - 1;
                out.push(0x40 | (n >> 8) as u8);
                out.push((n & 0xff) as u8);
            }
            Op::Val { value, len } => out.push(val_byte(value, len)),
        }
    }
}

/// The VAL opcode byte for `len` (1..=4) registers of `value` (1..=32).
fn val_byte(value: u8, len: usize) -> u8 {
    0x80 | ((value - 1) << 2) | (len - 1) as u8
}

/// Iterates the opcodes of a sparse body, with each opcode's byte position.
pub fn ops(body: &[u8]) -> impl Iterator<Item = (usize, Op)> + '_ {
    let mut pos = 0;
    std::iter::from_fn(move || {
        if pos >= body.len() {
            return None;
        }
        let op = Op::decode(&body[pos..]);
        let at = pos;
        pos += op.byte_len();
        Some((at, op))
    })
}

/// The body of an empty HLL: XZERO opcodes covering every register.
pub fn empty_body() -> Vec<u8> {
    let mut out = Vec::with_capacity(2);
    let mut left = REGISTERS;
    while left > 0 {
        let n = left.min(XZERO_MAX_LEN);
        Op::XZero(n).encode(&mut out);
        left -= n;
    }
    out
}

/// A zero run of `len` registers as the shortest opcode Redis picks.
fn zero_run(len: usize) -> Op {
    if len > ZERO_MAX_LEN {
        Op::XZero(len)
    } else {
        Op::Zero(len)
    }
}

/// Outcome of [`set`].
#[derive(Debug, PartialEq, Eq)]
pub enum SetOutcome {
    /// The register already held `count` or more.
    Unchanged,
    /// The body was updated in place.
    Updated,
    /// The value must become dense first (count above 32, or the body would pass the limit).
    NeedsDense,
}

/// Raises register `index` to `count` in the sparse `hll` (header included), growing the body
/// by at most 2 bytes, but never past `sparse_max_bytes` in total.
pub fn set(
    hll: &mut Vec<u8>,
    header_len: usize,
    index: usize,
    count: u8,
    sparse_max_bytes: usize,
) -> Result<SetOutcome, HllError> {
    if count > VAL_MAX_VALUE {
        return Ok(SetOutcome::NeedsDense);
    }
    // Step 1: find the opcode covering `index`, its first register and the opcode before it.
    let mut first = 0usize;
    let mut prev: Option<usize> = None;
    let mut found = None;
    for (at, op) in ops(&hll[header_len..]) {
        let span = op.span();
        if index < first + span {
            found = Some((header_len + at, op));
            break;
        }
        prev = Some(header_len + at);
        first += span;
    }
    let (p, op) = found.ok_or(HllError::Corrupt)?;

    // Step 2: the in-place cases, then the general split into up to three opcodes.
    match op {
        Op::Val { value, .. } if value >= count => return Ok(SetOutcome::Unchanged),
        Op::Val { len: 1, .. } | Op::Zero(1) => {
            hll[p] = val_byte(count, 1);
        }
        _ => {
            let last = first + op.span() - 1;
            let mut seq = Vec::with_capacity(5);
            let side = |len: usize| match op {
                Op::Val { value, .. } => Op::Val { value, len },
                _ => zero_run(len),
            };
            if index != first {
                side(index - first).encode(&mut seq);
            }
            Op::Val {
                value: count,
                len: 1,
            }
            .encode(&mut seq);
            if index != last {
                side(last - index).encode(&mut seq);
            }
            let old_len = op.byte_len();
            if seq.len() > old_len && hll.len() + seq.len() - old_len > sparse_max_bytes {
                return Ok(SetOutcome::NeedsDense);
            }
            hll.splice(p..p + old_len, seq);
        }
    }

    // Step 3: merge equal adjacent VAL opcodes, scanning up to five opcodes from `prev`.
    let mut p = prev.unwrap_or(header_len);
    let mut scans = 5;
    while p < hll.len() && scans > 0 {
        scans -= 1;
        let op = Op::decode(&hll[p..]);
        let Op::Val { value, len } = op else {
            p += op.byte_len();
            continue;
        };
        if p + 1 < hll.len() {
            if let Op::Val {
                value: next_value,
                len: next_len,
            } = Op::decode(&hll[p + 1..])
            {
                if next_value == value && len + next_len <= VAL_MAX_LEN {
                    hll[p + 1] = val_byte(value, len + next_len);
                    hll.remove(p);
                    continue;
                }
            }
        }
        p += 1;
    }
    Ok(SetOutcome::Updated)
}

/// Walks the runs of a sparse body as `(first register, value, len)`, failing when a run passes
/// the last register or the runs stop short of it (Redis's checks since 7.0.12, CVE-2023-36824).
fn runs(body: &[u8], mut f: impl FnMut(usize, u8, usize)) -> Result<(), HllError> {
    let mut idx = 0usize;
    for (_, op) in ops(body) {
        let value = match op {
            Op::Zero(_) | Op::XZero(_) => 0,
            Op::Val { value, .. } => value,
        };
        let len = op.span();
        if idx + len > REGISTERS {
            return Err(HllError::Corrupt);
        }
        f(idx, value, len);
        idx += len;
    }
    if idx == REGISTERS {
        Ok(())
    } else {
        Err(HllError::Corrupt)
    }
}

/// Writes the registers of a sparse body into dense registers.
pub fn to_dense_registers(body: &[u8], regs: &mut [u8]) -> Result<(), HllError> {
    runs(body, |first, value, len| {
        if value != 0 {
            for r in first..first + len {
                dense::set(regs, r, value);
            }
        }
    })
}

/// Folds the registers into `max`.
pub fn merge_into(body: &[u8], max: &mut [u8; REGISTERS]) -> Result<(), HllError> {
    runs(body, |first, value, len| {
        for m in &mut max[first..first + len] {
            *m = (*m).max(value);
        }
    })
}

/// Counts registers by value; fails when the runs do not cover exactly 16384 registers.
pub fn histogram(body: &[u8], histo: &mut [u32; 64]) -> Result<(), HllError> {
    let mut idx = 0usize;
    for (_, op) in ops(body) {
        let (value, len) = match op {
            Op::Zero(n) | Op::XZero(n) => (0, n),
            Op::Val { value, len } => (value, len),
        };
        idx += len;
        histo[usize::from(value)] += len as u32;
    }
    if idx == REGISTERS {
        Ok(())
    } else {
        Err(HllError::Corrupt)
    }
}

/// PFDEBUG DECODE's text: `z:n` (ZERO), `Z:n` (XZERO) and `v:value,len` separated by spaces.
pub fn decode_text(body: &[u8]) -> String {
    let mut out = String::new();
    for (_, op) in ops(body) {
        let item = match op {
            Op::Zero(n) => format!("z:{n} "),
            Op::XZero(n) => format!("Z:{n} "),
            Op::Val { value, len } => format!("v:{value},{len} "),
        };
        out.push_str(&item);
    }
    out.truncate(out.trim_end().len());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_body_is_one_xzero() {
        assert_eq!(empty_body(), vec![0x7f, 0xff]);
        assert_eq!(Op::decode(&empty_body()), Op::XZero(REGISTERS));
    }

    #[test]
    fn opcodes_roundtrip() {
        for op in [
            Op::Zero(1),
            Op::Zero(64),
            Op::XZero(65),
            Op::XZero(16384),
            Op::Val { value: 1, len: 1 },
            Op::Val { value: 32, len: 4 },
        ] {
            let mut b = Vec::new();
            op.encode(&mut b);
            assert_eq!(b.len(), op.byte_len());
            assert_eq!(Op::decode(&b), op);
        }
    }
}
