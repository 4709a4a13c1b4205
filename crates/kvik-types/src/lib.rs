//! kvik-types: Redis value algorithms, with no I/O and no storage.
//!
//! Each module reproduces one piece of Redis 7.0's value semantics exactly, so the server can
//! store the values its own way (RocksDB records, segments) and still answer as redis-server does:
//! - [`hll`]: HyperLogLog byte for byte (header, sparse and dense encodings, MurmurHash64A,
//!   the estimator, PFADD / PFCOUNT / PFMERGE).
//! - [`geo`]: 52-bit geohash scores, GEOHASH strings, distances, units and the search plan
//!   (score ranges to scan plus the exact in-radius / in-box filter).
//! - [`bits`]: BITCOUNT, BITPOS, BITOP, BITFIELD and SETBIT/GETBIT over an abstract byte store,
//!   so a segmented bitmap works without materialising it.
//! - [`glob`]: Redis's glob patterns (KEYS, SCAN MATCH, CONFIG GET, FUNCTION LIST ...).
//! - [`stream_id`]: stream IDs, their parsing in every command form, ordering and the next-ID rule.
//!
//! Errors are typed per module; their `Display` is Redis's reply text (error code first, no
//! leading `-`), so the command layer renders them unchanged.

pub mod bits;
pub mod geo;
pub mod glob;
pub mod hll;
pub mod stream_id;
mod strtol;
