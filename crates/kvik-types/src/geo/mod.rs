//! Geo as Redis 7.0 computes it (geo.c, geohash.c, geohash_helper.c), for a sorted set whose
//! scores are 52-bit geohashes:
//! - [`score`] / [`decode_score`]: GEOADD's score and the coordinates GEOPOS reports.
//! - [`geohash_string`]: GEOHASH's 11-character base32 string (on the standard -90..90 range).
//! - [`distance`]: the haversine distance with Redis's earth radius; [`unit_meters`] for
//!   `m|km|ft|mi`; [`format_distance`] and [`format_coordinate`] print as Redis replies.
//! - [`Search`]: GEOSEARCH and GEORADIUS* as a plan: the score ranges to scan, in Redis's order,
//!   and the exact in-radius / in-box filter with each hit's distance.

pub mod hash;

use hash::{Cell, Range};
use std::fmt;

/// Bits per coordinate in a stored score.
pub const STEP_MAX: u8 = 26;
/// Longitude limits.
pub const LON_MIN: f64 = -180.0;
pub const LON_MAX: f64 = 180.0;
/// Latitude limits (Web Mercator's).
pub const LAT_MIN: f64 = -85.051_128_78;
pub const LAT_MAX: f64 = 85.051_128_78;
/// Redis's earth radius (meters).
pub const EARTH_RADIUS_M: f64 = 6_372_797.560_856;
/// Half the Mercator world width (meters), for the step estimate.
const MERCATOR_MAX: f64 = 20_037_726.37;

const LON_RANGE: Range = Range {
    min: LON_MIN,
    max: LON_MAX,
};
const LAT_RANGE: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};

/// Why a geo argument is refused; `Display` is Redis's reply text.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GeoError {
    /// Longitude or latitude out of the limits.
    InvalidPair(f64, f64),
    /// A unit other than m, km, ft, mi.
    UnsupportedUnit,
}

impl fmt::Display for GeoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GeoError::InvalidPair(lon, lat) => {
                write!(f, "ERR invalid longitude,latitude pair {lon:.6},{lat:.6}")
            }
            GeoError::UnsupportedUnit => {
                f.write_str("ERR unsupported unit provided. please use M, KM, FT, MI")
            }
        }
    }
}

impl std::error::Error for GeoError {}

/// Checks a longitude/latitude pair against the limits (as GEOADD, GEOSEARCH FROMLONLAT ...).
pub fn check_lon_lat(lon: f64, lat: f64) -> Result<(), GeoError> {
    if (LON_MIN..=LON_MAX).contains(&lon) && (LAT_MIN..=LAT_MAX).contains(&lat) {
        Ok(())
    } else {
        Err(GeoError::InvalidPair(lon, lat))
    }
}

/// The 52-bit geohash of a valid pair (2^52 or more only at the exact maximum longitude or
/// latitude, as in Redis).
pub fn geohash_bits(lon: f64, lat: f64) -> Result<u64, GeoError> {
    check_lon_lat(lon, lat)?;
    let cell = hash::encode(LON_RANGE, LAT_RANGE, lon, lat, STEP_MAX)
        .ok_or(GeoError::InvalidPair(lon, lat))?;
    Ok(cell.align52())
}

/// GEOADD's sorted-set score: [`geohash_bits`] as a double (exact below 2^53; the few hashes
/// at longitude 180 round as in Redis).
pub fn score(lon: f64, lat: f64) -> Result<f64, GeoError> {
    geohash_bits(lon, lat).map(|bits| bits as f64)
}

/// The centre of the cell a score names, clamped to the limits: `(lon, lat)`.
pub fn decode_bits(bits: u64) -> (f64, f64) {
    let area = hash::decode(
        LON_RANGE,
        LAT_RANGE,
        Cell {
            bits,
            step: STEP_MAX,
        },
    );
    let lon = ((area.longitude.min + area.longitude.max) / 2.0).clamp(LON_MIN, LON_MAX);
    let lat = ((area.latitude.min + area.latitude.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

/// [`decode_bits`] of a sorted-set score (C's double to `uint64_t` conversion).
pub fn decode_score(score: f64) -> (f64, f64) {
    decode_bits(score as u64)
}

const BASE32: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";

/// GEOHASH's string for a stored score: the decoded point re-encoded on the standard
/// latitude range -90..90, 10 characters of 5 bits and an eleventh '0'.
pub fn geohash_string(score: f64) -> String {
    let (lon, lat) = decode_score(score);
    let standard_lat = Range {
        min: -90.0,
        max: 90.0,
    };
    let bits = hash::encode(LON_RANGE, standard_lat, lon, lat, STEP_MAX)
        .map(|c| c.bits)
        .unwrap_or(0);
    (0..11)
        .map(|i| {
            let index = if i == 10 {
                0
            } else {
                (bits >> (52 - (i + 1) * 5)) & 0x1f
            };
            char::from(BASE32[index as usize])
        })
        .collect()
}

fn deg_rad(deg: f64) -> f64 {
    deg * (std::f64::consts::PI / 180.0)
}

fn rad_deg(rad: f64) -> f64 {
    rad / (std::f64::consts::PI / 180.0)
}

/// Haversine distance in meters between two `(lon, lat)` points, in Redis's operation order.
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let lat1r = deg_rad(lat1);
    let lon1r = deg_rad(lon1);
    let lat2r = deg_rad(lat2);
    let lon2r = deg_rad(lon2);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let v = ((lon2r - lon1r) / 2.0).sin();
    2.0 * EARTH_RADIUS_M * (u * u + lat1r.cos() * lat2r.cos() * v * v).sqrt().asin()
}

/// Meters per unit for `m`, `km`, `ft`, `mi` (any case).
pub fn unit_meters(unit: &[u8]) -> Result<f64, GeoError> {
    const UNITS: [(&[u8], f64); 4] = [
        (b"m", 1.0),
        (b"km", 1000.0),
        (b"ft", 0.3048),
        (b"mi", 1609.34),
    ];
    UNITS
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(unit))
        .map(|&(_, m)| m)
        .ok_or(GeoError::UnsupportedUnit)
}

/// A distance as Redis 7.0 prints it: 4 decimals, rounded the way its fixed-point printer does
/// (scale by 10^4 in f64, round half to even, print the integer), not as `%.4f` would: a value
/// like 48212004.85954999... scales to exactly ...8595.5 and prints as .8596.
pub fn format_distance(d: f64) -> String {
    let scaled = (d * 10_000.0).round_ties_even();
    if !scaled.is_finite() || scaled.abs() >= 9.0e18 {
        return format!("{d:.4}");
    }
    let n = scaled as i64;
    let sign = if n < 0 { "-" } else { "" };
    let a = n.unsigned_abs();
    format!("{sign}{}.{:04}", a / 10_000, a % 10_000)
}

/// A coordinate as Redis prints it (GEOPOS, WITHCOORD): 17 decimals, trailing zeros and a
/// trailing dot removed, "-0" printed as "0".
pub fn format_coordinate(x: f64) -> String {
    let mut s = format!("{x:.17}");
    if s.contains('.') {
        let trimmed = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(trimmed);
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

/// The area a search covers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    /// BYRADIUS, in the search's unit.
    Radius(f64),
    /// BYBOX width height, in the search's unit.
    Box { width: f64, height: f64 },
}

/// A GEOSEARCH / GEORADIUS query: centre `(lon, lat)`, shape, and meters per unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Search {
    pub lon: f64,
    pub lat: f64,
    pub shape: Shape,
    pub unit: f64,
}

/// A member inside the search area.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// Decoded coordinates of the member.
    pub lon: f64,
    pub lat: f64,
    /// Distance from the centre in meters.
    pub meters: f64,
}

/// A half-open score range `[min, max)` to scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScoreRange {
    pub min: u64,
    pub max: u64,
}

impl Search {
    /// Half width and half height in meters (for a radius, the radius twice).
    fn half_extent_m(&self) -> (f64, f64) {
        match self.shape {
            Shape::Radius(r) => (self.unit * r, self.unit * r),
            Shape::Box { width, height } => (self.unit * (width / 2.0), self.unit * (height / 2.0)),
        }
    }

    /// `[min_lon, min_lat, max_lon, max_lat]` of the area (geohashBoundingBox).
    fn bounding_box(&self) -> [f64; 4] {
        let (width, height) = self.half_extent_m();
        let lat_delta = rad_deg(height / EARTH_RADIUS_M);
        let lon_delta_top = rad_deg(width / EARTH_RADIUS_M / deg_rad(self.lat + lat_delta).cos());
        let lon_delta_bottom =
            rad_deg(width / EARTH_RADIUS_M / deg_rad(self.lat - lat_delta).cos());
        let lon_delta = if self.lat < 0.0 {
            lon_delta_bottom
        } else {
            lon_delta_top
        };
        [
            self.lon - lon_delta,
            self.lat - lat_delta,
            self.lon + lon_delta,
            self.lat + lat_delta,
        ]
    }

    /// The steps whose cells are about the size of the area.
    fn estimate_steps(range_m: f64, lat: f64) -> u8 {
        if range_m == 0.0 {
            return 26;
        }
        let mut range_m = range_m;
        let mut step: i32 = 1;
        while range_m < MERCATOR_MAX {
            range_m *= 2.0;
            step += 1;
        }
        step -= 2;
        if !(-66.0..=66.0).contains(&lat) {
            step -= 1;
            if !(-80.0..=80.0).contains(&lat) {
                step -= 1;
            }
        }
        step.clamp(1, 26) as u8
    }

    /// The centre cell and its neighbours in Redis's scan order (centre, N, S, E, W, NE, NW,
    /// SE, SW), with cells outside the area replaced by [`Cell::NONE`].
    pub fn cells(&self) -> [Cell; 9] {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounding_box();
        let radius_m = match self.shape {
            Shape::Radius(r) => r,
            Shape::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        } * self.unit;
        let mut steps = Self::estimate_steps(radius_m, self.lat);
        let plan = |steps: u8| {
            let cell =
                hash::encode(LON_RANGE, LAT_RANGE, self.lon, self.lat, steps).unwrap_or(Cell {
                    bits: 0,
                    step: steps,
                });
            (
                cell,
                hash::neighbors(cell),
                hash::decode(LON_RANGE, LAT_RANGE, cell),
            )
        };
        let (mut cell, mut n, mut area) = plan(steps);
        let decode = |c: Cell| hash::decode(LON_RANGE, LAT_RANGE, c);
        let too_coarse = decode(n.north).latitude.max < max_lat
            || decode(n.south).latitude.min > min_lat
            || decode(n.east).longitude.max < max_lon
            || decode(n.west).longitude.min > min_lon;
        if steps > 1 && too_coarse {
            steps -= 1;
            (cell, n, area) = plan(steps);
        }
        if steps >= 2 {
            if area.latitude.min < min_lat {
                n.south = Cell::NONE;
                n.south_west = Cell::NONE;
                n.south_east = Cell::NONE;
            }
            if area.latitude.max > max_lat {
                n.north = Cell::NONE;
                n.north_east = Cell::NONE;
                n.north_west = Cell::NONE;
            }
            if area.longitude.min < min_lon {
                n.west = Cell::NONE;
                n.south_west = Cell::NONE;
                n.north_west = Cell::NONE;
            }
            if area.longitude.max > max_lon {
                n.east = Cell::NONE;
                n.south_east = Cell::NONE;
                n.north_east = Cell::NONE;
            }
        }
        [
            cell,
            n.north,
            n.south,
            n.east,
            n.west,
            n.north_east,
            n.north_west,
            n.south_east,
            n.south_west,
        ]
    }

    /// The score ranges to scan, in order; members are visited in score order within each
    /// range (then by member, as the sorted set orders them). Dropped cells are left out, and
    /// so is a cell equal to the one scanned just before it, unless that one was the centre
    /// (Redis's rule for huge radii).
    pub fn ranges(&self) -> Vec<ScoreRange> {
        let cells = self.cells();
        let mut out = Vec::with_capacity(9);
        let mut last: Option<usize> = None;
        for (i, &c) in cells.iter().enumerate() {
            if c.is_none() {
                continue;
            }
            if let Some(l) = last.filter(|&l| l != 0) {
                if cells[l] == c {
                    continue;
                }
            }
            let next = Cell {
                bits: c.bits + 1,
                step: c.step,
            };
            out.push(ScoreRange {
                min: c.align52(),
                max: next.align52(),
            });
            last = Some(i);
        }
        out
    }

    /// Whether the member with this score is inside the area, with its distance.
    pub fn test(&self, score: f64) -> Option<Hit> {
        let (lon, lat) = decode_score(score);
        let meters = match self.shape {
            Shape::Radius(r) => {
                let d = distance(self.lon, self.lat, lon, lat);
                if d > r * self.unit {
                    return None;
                }
                d
            }
            Shape::Box { width, height } => {
                let (w, h) = (width * self.unit, height * self.unit);
                let lon_distance = distance(lon, lat, self.lon, lat);
                let lat_distance = distance(lon, lat, lon, self.lat);
                if lon_distance > w / 2.0 || lat_distance > h / 2.0 {
                    return None;
                }
                distance(self.lon, self.lat, lon, lat)
            }
        };
        Some(Hit { lon, lat, meters })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // Palermo and Catania from Redis's documentation.
        let palermo = score(13.361389, 38.115556).unwrap();
        let catania = score(15.087269, 37.502669).unwrap();
        assert_eq!(palermo, 3_479_099_956_230_698.0);
        assert_eq!(catania, 3_479_447_370_796_909.0);
        assert_eq!(geohash_string(palermo), "sqc8b49rny0");
        assert_eq!(geohash_string(catania), "sqdtr74hyu0");
        let (lon1, lat1) = decode_score(palermo);
        let (lon2, lat2) = decode_score(catania);
        assert_eq!(
            format_distance(distance(lon1, lat1, lon2, lat2)),
            "166274.1516"
        );
        assert_eq!(format_coordinate(lon1), "13.36138933897018433");
        assert_eq!(format_coordinate(lat1), "38.11555639549629859");
    }

    #[test]
    fn limits_and_units() {
        assert_eq!(
            check_lon_lat(200.0, 10.0).unwrap_err().to_string(),
            "ERR invalid longitude,latitude pair 200.000000,10.000000"
        );
        assert!(check_lon_lat(180.0, LAT_MAX).is_ok());
        assert_eq!(unit_meters(b"KM"), Ok(1000.0));
        assert_eq!(unit_meters(b"yd"), Err(GeoError::UnsupportedUnit));
    }

    #[test]
    fn distance_format_rounds_like_redis_fixed_point_printer() {
        // 14695019.081190841 m in feet is 48212004.85954999...; times 10^4 it rounds to
        // ...8595.5 in f64, and half to even gives ...8596 (redis-server 7.0.15 prints that).
        assert_eq!(
            format_distance(14695019.081190841 / 0.3048),
            "48212004.8596"
        );
        assert_eq!(format_distance(0.0), "0.0000");
        assert_eq!(format_distance(166274.1516), "166274.1516");
    }

    #[test]
    fn coordinate_format() {
        assert_eq!(format_coordinate(-0.0), "0");
        assert_eq!(format_coordinate(15.0), "15");
        assert_eq!(format_coordinate(0.5), "0.5");
    }
}
