//! Geohash cells as Redis computes them (geohash.c): latitude bits in the even positions,
//! longitude bits in the odd ones, `step` bits each; cells are decoded back to their bounds
//! and moved to their eight neighbours.

/// A cell: `step` bits of each coordinate, interleaved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    pub bits: u64,
    pub step: u8,
}

impl Cell {
    /// The "no cell" value Redis uses for dropped neighbours.
    pub const NONE: Cell = Cell { bits: 0, step: 0 };

    pub fn is_none(self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The cell as a 52-bit score prefix: `bits` shifted to the top of 52 bits.
    pub fn align52(self) -> u64 {
        self.bits << (52 - u32::from(self.step) * 2)
    }
}

/// A coordinate interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    pub min: f64,
    pub max: f64,
}

/// A cell's bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Area {
    pub longitude: Range,
    pub latitude: Range,
}

/// Spreads the 32 bits of `v` to the even bit positions of a u64.
fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | (x << 16)) & 0x0000_ffff_0000_ffff;
    x = (x | (x << 8)) & 0x00ff_00ff_00ff_00ff;
    x = (x | (x << 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// Gathers the even bit positions of `x` into a u32.
fn squash(x: u64) -> u32 {
    let mut x = x & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0f0f_0f0f_0f0f_0f0f;
    x = (x | (x >> 4)) & 0x00ff_00ff_00ff_00ff;
    x = (x | (x >> 8)) & 0x0000_ffff_0000_ffff;
    x = (x | (x >> 16)) & 0x0000_0000_ffff_ffff;
    x as u32
}

/// `lat` in the even bits, `lon` in the odd bits.
pub fn interleave(lat: u32, lon: u32) -> u64 {
    spread(lat) | (spread(lon) << 1)
}

/// The inverse of [`interleave`]: `(lat, lon)`.
pub fn deinterleave(bits: u64) -> (u32, u32) {
    (squash(bits), squash(bits >> 1))
}

/// C's conversion of a non-negative double to `uint32_t` (truncation; out-of-range values do
/// not occur for in-range coordinates, saturate otherwise).
fn to_u32(x: f64) -> u32 {
    x as u32
}

/// Encodes a coordinate within the given ranges at `step` bits per coordinate. `None` outside
/// the ranges. Like Redis, a coordinate exactly at a range's maximum yields 2^step, which spills
/// one bit past the cell (Redis stores that score as is).
pub fn encode(lon_range: Range, lat_range: Range, lon: f64, lat: f64, step: u8) -> Option<Cell> {
    if !(lat >= lat_range.min
        && lat <= lat_range.max
        && lon >= lon_range.min
        && lon <= lon_range.max)
    {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_offset = (lat - lat_range.min) / (lat_range.max - lat_range.min) * scale;
    let lon_offset = (lon - lon_range.min) / (lon_range.max - lon_range.min) * scale;
    Some(Cell {
        bits: interleave(to_u32(lat_offset), to_u32(lon_offset)),
        step,
    })
}

/// The bounds of a cell.
pub fn decode(lon_range: Range, lat_range: Range, cell: Cell) -> Area {
    let (ilat, ilon) = deinterleave(cell.bits);
    let scale = (1u64 << cell.step) as f64;
    let lat_span = lat_range.max - lat_range.min;
    let lon_span = lon_range.max - lon_range.min;
    // Redis adds 1 in 32-bit unsigned arithmetic.
    let bound = |base: f64, i: u32, span: f64| base + (f64::from(i) / scale) * span;
    Area {
        latitude: Range {
            min: bound(lat_range.min, ilat, lat_span),
            max: bound(lat_range.min, ilat.wrapping_add(1), lat_span),
        },
        longitude: Range {
            min: bound(lon_range.min, ilon, lon_span),
            max: bound(lon_range.min, ilon.wrapping_add(1), lon_span),
        },
    }
}

const EVEN: u64 = 0x5555_5555_5555_5555;
const ODD: u64 = 0xaaaa_aaaa_aaaa_aaaa;

/// Moves a cell one step along longitude (`d` > 0 east, < 0 west), wrapping around.
fn move_lon(cell: &mut Cell, d: i8) {
    if d == 0 {
        return;
    }
    let width = 64 - u32::from(cell.step) * 2;
    let mut x = cell.bits & ODD;
    let y = cell.bits & EVEN;
    let zz = EVEN >> width;
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= ODD >> width;
    cell.bits = x | y;
}

/// Moves a cell one step along latitude (`d` > 0 north, < 0 south), wrapping around.
fn move_lat(cell: &mut Cell, d: i8) {
    if d == 0 {
        return;
    }
    let width = 64 - u32::from(cell.step) * 2;
    let x = cell.bits & ODD;
    let mut y = cell.bits & EVEN;
    let zz = ODD >> width;
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= EVEN >> width;
    cell.bits = x | y;
}

/// The eight neighbours of a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Neighbors {
    pub north: Cell,
    pub east: Cell,
    pub west: Cell,
    pub south: Cell,
    pub north_east: Cell,
    pub south_east: Cell,
    pub north_west: Cell,
    pub south_west: Cell,
}

fn moved(cell: Cell, lon: i8, lat: i8) -> Cell {
    let mut c = cell;
    move_lon(&mut c, lon);
    move_lat(&mut c, lat);
    c
}

pub fn neighbors(cell: Cell) -> Neighbors {
    Neighbors {
        east: moved(cell, 1, 0),
        west: moved(cell, -1, 0),
        south: moved(cell, 0, -1),
        north: moved(cell, 0, 1),
        north_west: moved(cell, -1, 1),
        south_west: moved(cell, -1, -1),
        north_east: moved(cell, 1, 1),
        south_east: moved(cell, 1, -1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn interleave_roundtrips(lat in any::<u32>(), lon in any::<u32>()) {
            prop_assert_eq!(deinterleave(interleave(lat, lon)), (lat, lon));
        }

        #[test]
        fn neighbours_are_one_cell_away(lat in 1u32..1000, lon in 1u32..1000) {
            let cell = Cell { bits: interleave(lat, lon), step: 10 };
            let n = neighbors(cell);
            prop_assert_eq!(deinterleave(n.east.bits), (lat, lon + 1));
            prop_assert_eq!(deinterleave(n.west.bits), (lat, lon - 1));
            prop_assert_eq!(deinterleave(n.north.bits), (lat + 1, lon));
            prop_assert_eq!(deinterleave(n.south_west.bits), (lat - 1, lon - 1));
        }
    }
}
