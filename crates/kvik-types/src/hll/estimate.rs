//! The cardinality estimator Redis uses since 5.0 (Otmar Ertl's "improved raw estimator" with
//! the sigma/tau corrections), computed from a register histogram so each encoding only has to
//! count its registers. The float operations follow Redis's order, so results agree exactly.

use super::{Q, REGISTERS};

/// 1 / (2 ln 2): the alpha of the limit m → ∞.
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let z_prev = z;
        z += x * y;
        y += y;
        if z_prev == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let z_prev = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if z_prev == z {
            return z / 3.0;
        }
    }
}

/// The estimate for a histogram of register values (`histo[v]` registers hold `v`).
pub fn count_histogram(histo: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let q = Q as usize;
    let mut z = m * tau((m - f64::from(histo[q + 1])) / m);
    for j in (1..=q).rev() {
        z += f64::from(histo[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(histo[0]) / m);
    (ALPHA_INF * m * m / z).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_is_zero() {
        let mut h = [0u32; 64];
        h[0] = REGISTERS as u32;
        assert_eq!(count_histogram(&h), 0);
    }

    #[test]
    fn one_register_set_is_one() {
        let mut h = [0u32; 64];
        h[0] = REGISTERS as u32 - 1;
        h[1] = 1;
        assert_eq!(count_histogram(&h), 1);
    }
}
