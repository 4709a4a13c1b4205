//! MurmurHash64A as Redis uses it for HyperLogLog: 8-byte blocks read little endian whatever
//! the machine, so the same element lands in the same register everywhere.

const M: u64 = 0xc6a4_a793_5bd1_e995;
const R: u32 = 47;

/// MurmurHash2, 64-bit version, of `key` with `seed`.
pub fn murmur_hash64a(key: &[u8], seed: u32) -> u64 {
    // Redis multiplies the length as a C `int` by a `uint64_t`: the length wraps to 64 bits.
    let mut h = u64::from(seed) ^ (key.len() as u64).wrapping_mul(M);
    let mut blocks = key.chunks_exact(8);
    for block in &mut blocks {
        let mut k = u64::from_le_bytes(block.try_into().expect("8-byte block"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_bytes_fold_in_order() {
        // Every tail length goes through the same fold; distinct inputs give distinct hashes.
        let data = b"abcdefghijklmnop";
        let hashes: Vec<u64> = (0..=data.len())
            .map(|n| murmur_hash64a(&data[..n], 0xadc8_3b19))
            .collect();
        for (i, a) in hashes.iter().enumerate() {
            for b in &hashes[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }
}
