//! HyperLogLog exactly as Redis 7.0 stores and counts it, so the string GET returns is a valid
//! Redis HLL and counts agree with redis-server for the same input.
//!
//! A value is a 16-byte header followed by registers:
//!
//! | bytes | content |
//! |---|---|
//! | 0..4 | magic `HYLL` |
//! | 4 | encoding: 0 dense, 1 sparse |
//! | 5..8 | unused (zero) |
//! | 8..16 | cached cardinality, little endian; bit 7 of byte 15 set means "stale" |
//!
//! 16384 registers (P = 14) of 6 bits each hold the longest run of zeroes seen (plus one) in the
//! 50 high bits of an element's MurmurHash64A, the low 14 bits choosing the register. New values
//! are sparse (run-length opcodes, [`sparse`]); a register above 32 or a body past
//! `hll-sparse-max-bytes` promotes the value to dense (12288 packed bytes, [`dense`]), never back.
//!
//! Entry points follow the commands: [`pfadd`], [`pfcount`], [`pfcount_many`], [`pfmerge`], plus
//! the cheap PFDEBUG pieces ([`registers`], [`to_dense`], [`decode_sparse`]). The caller stores
//! the returned bytes; nothing here touches storage.

pub mod dense;
mod estimate;
mod murmur;
pub mod sparse;

pub use estimate::count_histogram;
pub use murmur::murmur_hash64a;

use std::fmt;

/// Registers per HLL (2^P).
pub const REGISTERS: usize = 1 << P;
/// Index bits.
pub const P: u32 = 14;
/// Hash bits left for the zero run after the index.
pub const Q: u32 = 64 - P;
/// Highest register value.
pub const REGISTER_MAX: u8 = 63;
/// Header bytes.
pub const HEADER_LEN: usize = 16;
/// Total length of a dense value.
pub const DENSE_LEN: usize = HEADER_LEN + dense::DENSE_REGISTERS_LEN;
/// Redis's default `hll-sparse-max-bytes`.
pub const DEFAULT_SPARSE_MAX_BYTES: usize = 3000;
/// The seed Redis hashes elements with.
pub const HASH_SEED: u32 = 0xadc8_3b19;

const MAGIC: &[u8; 4] = b"HYLL";
const ENCODING_AT: usize = 4;
const CARD_AT: usize = 8;
const STALE_BIT: u8 = 1 << 7;

/// The two stored encodings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Dense = 0,
    Sparse = 1,
}

/// Why an HLL command fails; `Display` is Redis's reply text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HllError {
    /// A string that is not an HLL (bad magic, encoding or dense length).
    NotHll,
    /// An HLL whose registers do not add up (a broken sparse body).
    Corrupt,
}

impl fmt::Display for HllError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HllError::NotHll => "WRONGTYPE Key is not a valid HyperLogLog string value.",
            HllError::Corrupt => "INVALIDOBJ Corrupted HLL object detected",
        })
    }
}

impl std::error::Error for HllError {}

/// An empty HLL as PFADD creates it: sparse, one XZERO, cached cardinality 0 (valid).
pub fn new_sparse() -> Vec<u8> {
    let mut v = Vec::with_capacity(HEADER_LEN + 2);
    v.extend_from_slice(MAGIC);
    v.push(Encoding::Sparse as u8);
    v.extend_from_slice(&[0; 11]);
    v.extend_from_slice(&sparse::empty_body());
    v
}

/// Checks that a string is an HLL (Redis's `isHLLObjectOrReply`); the sparse body is only
/// checked when it is walked.
pub fn validate(value: &[u8]) -> Result<Encoding, HllError> {
    if value.len() < HEADER_LEN || &value[..4] != MAGIC {
        return Err(HllError::NotHll);
    }
    match value[ENCODING_AT] {
        0 if value.len() == DENSE_LEN => Ok(Encoding::Dense),
        1 => Ok(Encoding::Sparse),
        _ => Err(HllError::NotHll),
    }
}

/// The cached cardinality, when it is not stale.
pub fn cached_cardinality(value: &[u8]) -> Option<u64> {
    let card: [u8; 8] = value[CARD_AT..CARD_AT + 8].try_into().expect("8 bytes");
    (card[7] & STALE_BIT == 0).then(|| u64::from_le_bytes(card))
}

fn invalidate_cache(value: &mut [u8]) {
    value[CARD_AT + 7] |= STALE_BIT;
}

/// The register an element hashes to and its zero-run count (1..=51).
pub fn pattern(element: &[u8]) -> (usize, u8) {
    let hash = murmur_hash64a(element, HASH_SEED);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    // The sentinel bit at Q bounds the run at Q + 1.
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// Turns a sparse value dense in place (header kept, encoding byte changed); a dense value is
/// left alone. Returns whether it converted.
pub fn to_dense(value: &mut Vec<u8>) -> Result<bool, HllError> {
    if validate(value)? == Encoding::Dense {
        return Ok(false);
    }
    let mut out = vec![0u8; DENSE_LEN];
    out[..HEADER_LEN].copy_from_slice(&value[..HEADER_LEN]);
    out[ENCODING_AT] = Encoding::Dense as u8;
    sparse::to_dense_registers(&value[HEADER_LEN..], &mut out[HEADER_LEN..])?;
    *value = out;
    Ok(true)
}

/// Raises register `index` to `count` in either encoding, promoting when needed. Does not touch
/// the cached cardinality. True when the register changed.
fn set_register(
    value: &mut Vec<u8>,
    index: usize,
    count: u8,
    sparse_max_bytes: usize,
) -> Result<bool, HllError> {
    if value[ENCODING_AT] == Encoding::Sparse as u8 {
        match sparse::set(value, HEADER_LEN, index, count, sparse_max_bytes)? {
            sparse::SetOutcome::Unchanged => return Ok(false),
            sparse::SetOutcome::Updated => return Ok(true),
            sparse::SetOutcome::NeedsDense => {
                to_dense(value)?;
            }
        }
    }
    Ok(dense::raise(&mut value[HEADER_LEN..], index, count))
}

/// PFADD: adds `elements` to `existing` (or to a new HLL when `None`). Returns the value to store
/// and the reply: true when a register changed or the key was created. On a change the cached
/// cardinality is marked stale. On error nothing should be stored.
pub fn pfadd<'e>(
    existing: Option<Vec<u8>>,
    elements: impl IntoIterator<Item = &'e [u8]>,
    sparse_max_bytes: usize,
) -> Result<(Vec<u8>, bool), HllError> {
    let (mut value, mut changed) = match existing {
        Some(v) => {
            validate(&v)?;
            (v, false)
        }
        None => (new_sparse(), true),
    };
    for element in elements {
        let (index, count) = pattern(element);
        changed |= set_register(&mut value, index, count, sparse_max_bytes)?;
    }
    if changed {
        invalidate_cache(&mut value);
    }
    Ok((value, changed))
}

/// PFCOUNT of one key: the cached cardinality, or a fresh estimate written into the header's
/// cache. Returns the count and whether `value` changed (then Redis stores it and counts a
/// write).
pub fn pfcount(value: &mut [u8]) -> Result<(u64, bool), HllError> {
    let encoding = validate(value)?;
    if let Some(card) = cached_cardinality(value) {
        return Ok((card, false));
    }
    let mut histo = [0u32; 64];
    match encoding {
        Encoding::Dense => dense::histogram(&value[HEADER_LEN..], &mut histo),
        Encoding::Sparse => sparse::histogram(&value[HEADER_LEN..], &mut histo)?,
    }
    let card = count_histogram(&histo);
    value[CARD_AT..CARD_AT + 8].copy_from_slice(&card.to_le_bytes());
    Ok((card, true))
}

/// Folds one HLL's registers into `max` (validating it first).
pub fn merge_registers(value: &[u8], max: &mut [u8; REGISTERS]) -> Result<Encoding, HllError> {
    let encoding = validate(value)?;
    match encoding {
        Encoding::Dense => dense::merge_into(&value[HEADER_LEN..], max),
        Encoding::Sparse => sparse::merge_into(&value[HEADER_LEN..], max)?,
    }
    Ok(encoding)
}

/// PFCOUNT of several keys (absent keys left out): the estimate of their union. No cache is
/// read or written.
pub fn pfcount_many<'v>(values: impl IntoIterator<Item = &'v [u8]>) -> Result<u64, HllError> {
    let mut max = [0u8; REGISTERS];
    for v in values {
        merge_registers(v, &mut max)?;
    }
    let mut histo = [0u32; 64];
    for &r in &max {
        histo[usize::from(r)] += 1;
    }
    Ok(count_histogram(&histo))
}

/// PFMERGE: the union of `dest` (when present) and `sources` (absent keys left out), written
/// into `dest`'s value or a new one. The result is dense when any input was dense, else sparse
/// as long as it fits `sparse_max_bytes`; its cache is stale.
pub fn pfmerge<'v>(
    dest: Option<Vec<u8>>,
    sources: impl IntoIterator<Item = &'v [u8]>,
    sparse_max_bytes: usize,
) -> Result<Vec<u8>, HllError> {
    let mut max = [0u8; REGISTERS];
    let mut any_dense = false;
    if let Some(d) = &dest {
        any_dense |= merge_registers(d, &mut max)? == Encoding::Dense;
    }
    for s in sources {
        any_dense |= merge_registers(s, &mut max)? == Encoding::Dense;
    }
    let mut value = dest.unwrap_or_else(new_sparse);
    if any_dense {
        to_dense(&mut value)?;
    }
    for (index, &count) in max.iter().enumerate() {
        if count != 0 {
            set_register(&mut value, index, count, sparse_max_bytes)?;
        }
    }
    invalidate_cache(&mut value);
    Ok(value)
}

/// Every register's value (a sparse value is read, not converted). PFDEBUG GETREG first turns
/// a sparse value dense ([`to_dense`], stored when it converted), then replies with these.
pub fn registers(value: &[u8]) -> Result<Vec<u8>, HllError> {
    let mut max = [0u8; REGISTERS];
    merge_registers(value, &mut max)?;
    Ok(max.to_vec())
}

/// PFDEBUG DECODE: the opcodes of a sparse value as text; `None` for a dense one.
pub fn decode_sparse(value: &[u8]) -> Result<Option<String>, HllError> {
    Ok(match validate(value)? {
        Encoding::Dense => None,
        Encoding::Sparse => Some(sparse::decode_text(&value[HEADER_LEN..])),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn count(v: &[u8]) -> u64 {
        let mut v = v.to_vec();
        pfcount(&mut v).unwrap().0
    }

    #[test]
    fn new_value_layout() {
        let v = new_sparse();
        assert_eq!(v.len(), 18);
        assert_eq!(&v[..5], b"HYLL\x01");
        assert_eq!(cached_cardinality(&v), Some(0));
    }

    #[test]
    fn pfadd_created_key_counts_as_change_and_stales_cache() {
        let (v, changed) = pfadd(None, [], DEFAULT_SPARSE_MAX_BYTES).unwrap();
        assert!(changed);
        assert_eq!(cached_cardinality(&v), None);
        let (v, changed) = pfadd(Some(v), [&b"a"[..]], DEFAULT_SPARSE_MAX_BYTES).unwrap();
        assert!(changed);
        let (_, changed) = pfadd(Some(v), [&b"a"[..]], DEFAULT_SPARSE_MAX_BYTES).unwrap();
        assert!(!changed);
    }

    #[test]
    fn validation_errors() {
        assert_eq!(validate(b"hello"), Err(HllError::NotHll));
        let mut v = new_sparse();
        v[4] = 2;
        assert_eq!(validate(&v), Err(HllError::NotHll));
        v[4] = 0;
        assert_eq!(validate(&v), Err(HllError::NotHll));
        let mut broken = new_sparse();
        broken.push(0x00);
        invalidate_cache(&mut broken);
        assert_eq!(pfcount(&mut broken), Err(HllError::Corrupt));
        assert_eq!(
            HllError::NotHll.to_string(),
            "WRONGTYPE Key is not a valid HyperLogLog string value."
        );
    }

    #[test]
    fn promotion_to_dense_past_the_limit() {
        let elements: Vec<String> = (0..3000).map(|i| format!("e{i}")).collect();
        let (v, _) = pfadd(
            None,
            elements.iter().map(|e| e.as_bytes()),
            DEFAULT_SPARSE_MAX_BYTES,
        )
        .unwrap();
        assert_eq!(validate(&v), Ok(Encoding::Dense));
        let c = count(&v);
        assert!((2900..3100).contains(&c), "{c}");
    }

    proptest! {
        #[test]
        fn sparse_and_dense_agree(elements in proptest::collection::vec(any::<u32>(), 0..400)) {
            let bytes: Vec<[u8; 4]> = elements.iter().map(|e| e.to_le_bytes()).collect();
            let (sparse_v, _) = pfadd(None, bytes.iter().map(|b| &b[..]), usize::MAX).unwrap();
            let mut dense_v = new_sparse();
            to_dense(&mut dense_v).unwrap();
            let (dense_v, _) = pfadd(Some(dense_v), bytes.iter().map(|b| &b[..]), 0).unwrap();
            prop_assert_eq!(validate(&dense_v), Ok(Encoding::Dense));
            prop_assert_eq!(registers(&sparse_v).unwrap(), registers(&dense_v).unwrap());
            prop_assert_eq!(count(&sparse_v), count(&dense_v));
            let mut converted = sparse_v.clone();
            to_dense(&mut converted).unwrap();
            prop_assert_eq!(&converted[HEADER_LEN..], &dense_v[HEADER_LEN..]);
        }
    }
}
