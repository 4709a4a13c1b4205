//! Redis Cluster key slots (CRC16-XMODEM of the key or of its `{hash tag}`, modulo 16384), as
//! `kvik_resp::cluster` defines them for the server, the client and the load generator alike.
//!
//! Every key on disk is prefixed with its slot (see `storage::encoding`), whether or not cluster
//! mode is on, so per-slot scans and slot migration never change the on-disk format.

pub use kvik_resp::cluster::{crc16, hash_tag, key_slot, prefix_slot, SLOTS};
