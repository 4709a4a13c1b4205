//! The dense representation: 16384 registers of 6 bits packed least significant bit first
//! (register 0 in the low 6 bits of byte 0), 12288 bytes after the header.

use super::{REGISTERS, REGISTER_MAX};

/// Bytes the dense registers take.
pub const DENSE_REGISTERS_LEN: usize = REGISTERS * 6 / 8;

/// Register `index` of a dense register array. The last register's second byte lies past the
/// array (Redis reads the string's NUL terminator there); it reads as zero.
pub fn get(regs: &[u8], index: usize) -> u8 {
    let bit = index * 6;
    let (byte, shift) = (bit / 8, bit % 8);
    let b0 = u16::from(regs[byte]);
    let b1 = u16::from(regs.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> shift) | (b1 << (8 - shift))) & u16::from(REGISTER_MAX)) as u8
}

/// Sets register `index` to `value` (at most 63).
pub fn set(regs: &mut [u8], index: usize, value: u8) {
    let bit = index * 6;
    let (byte, shift) = (bit / 8, bit % 8);
    let v = u16::from(value);
    let word = u16::from(regs[byte]) | (u16::from(regs.get(byte + 1).copied().unwrap_or(0)) << 8);
    let mask = u16::from(REGISTER_MAX) << shift;
    let word = (word & !mask) | (v << shift);
    regs[byte] = word as u8;
    if let Some(next) = regs.get_mut(byte + 1) {
        *next = (word >> 8) as u8;
    }
}

/// Raises register `index` to `count` if that is higher; true when it changed.
pub fn raise(regs: &mut [u8], index: usize, count: u8) -> bool {
    if count > get(regs, index) {
        set(regs, index, count);
        true
    } else {
        false
    }
}

/// Folds every register into `max` (the per-register maximum of a merge).
pub fn merge_into(regs: &[u8], max: &mut [u8; REGISTERS]) {
    for (i, m) in max.iter_mut().enumerate() {
        *m = (*m).max(get(regs, i));
    }
}

/// Counts registers by value.
pub fn histogram(regs: &[u8], histo: &mut [u32; 64]) {
    for i in 0..REGISTERS {
        histo[usize::from(get(regs, i))] += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn set_then_get_leaves_neighbours(values in proptest::collection::vec(0u8..64, REGISTERS)) {
            let mut regs = vec![0u8; DENSE_REGISTERS_LEN];
            for (i, &v) in values.iter().enumerate() {
                set(&mut regs, i, v);
            }
            for (i, &v) in values.iter().enumerate() {
                prop_assert_eq!(get(&regs, i), v);
            }
        }
    }
}
