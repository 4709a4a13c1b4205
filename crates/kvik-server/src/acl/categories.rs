//! Redis's ACL command categories (`+@read`, `-@dangerous` ...) and which commands belong to
//! each. Membership is data on the command table (each spec's `acl` list, as COMMAND INFO
//! prints it); this module only numbers the categories so a set of them is a bitmask.

use crate::cmd::table;
use std::sync::OnceLock;

/// Every category, in Redis's order (ACL CAT lists them so).
pub const CATEGORIES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The bit of category `name` (case-insensitive), if it is one.
pub fn bit(name: &[u8]) -> Option<u32> {
    CATEGORIES
        .iter()
        .position(|c| c.as_bytes().eq_ignore_ascii_case(name))
        .map(|i| 1 << i)
}

/// The category bits of every table entry, by entry id.
pub fn of_entries() -> &'static [u32] {
    static BITS: OnceLock<Vec<u32>> = OnceLock::new();
    BITS.get_or_init(|| {
        let t = table();
        (0..t.len())
            .map(|id| {
                t.entry(id)
                    .spec
                    .acl
                    .iter()
                    .map(|c| bit(c.as_bytes()).unwrap_or(0))
                    .fold(0, |a, b| a | b)
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A category name on a spec that is not one of Redis's would silently grant nothing.
    #[test]
    fn every_spec_category_is_known() {
        let t = table();
        for id in 0..t.len() {
            let e = t.entry(id);
            for c in e.spec.acl {
                assert!(
                    bit(c.as_bytes()).is_some(),
                    "{}: unknown category {c}",
                    e.full_name
                );
            }
        }
    }
}
