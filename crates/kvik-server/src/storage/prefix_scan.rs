//! Iterating the keys that start with a literal prefix (SCAN MATCH, KEYS with a pattern such as
//! `user:*`). Keys are stored as `db | slot | key`, so one prefix's keys lie in one run per
//! cluster slot: reading the 16,384 runs, seeking from each to the next, costs a seek a slot
//! and a step per key found, where walking the database costs a step per key it holds.

use super::encoding::{db_prefix, decode_meta_key, Meta};
use super::{Storage, StorageResult};
use crate::slot::SLOTS;

impl Storage {
    /// [`scan_meta`](Storage::scan_meta) of the keys of database `db` that start with
    /// `key_prefix`, slot by slot (only slot `only_slot` if given: a prefix holding a whole
    /// hash tag), in storage order. Each slot counts as one record visited toward `limit`, so
    /// a call's work stays bounded where no key matches. The position returned is a raw meta
    /// key, as [`scan_meta`](Storage::scan_meta)'s, and either kind of scan goes on from the
    /// other's: the last key visited, or `db | slot`, the start of the slot to go on from (no
    /// key is stored as exactly that but the empty key of slot 0, and a prefix scan never
    /// returns slot 0's start).
    pub fn scan_meta_prefixed(
        &self,
        db: u16,
        key_prefix: &[u8],
        only_slot: Option<u16>,
        after: Option<&[u8]>,
        limit: usize,
        mut f: impl FnMut(&[u8], &Meta) -> bool,
    ) -> StorageResult<Option<Vec<u8>>> {
        let last = only_slot.unwrap_or(SLOTS as u16 - 1);
        let mut slot = only_slot.unwrap_or(0);
        if let Some((_, from, _)) = after.and_then(decode_meta_key) {
            slot = slot.max(from);
        }
        let mut budget = limit.max(1);
        while slot <= last {
            let mut prefix = db_prefix(db).to_vec();
            prefix.extend_from_slice(&slot.to_be_bytes());
            let slot_start = prefix.len();
            prefix.extend_from_slice(key_prefix);
            // Resumes inside this slot only from a position past the prefix's start; one
            // before it (a walk of the whole database stopped there) starts at the prefix.
            let resume =
                after.filter(|a| a.starts_with(&prefix[..slot_start]) && *a >= &prefix[..]);
            let mut visited = 0;
            let stopped = self.scan_meta_prefix(&prefix, resume, budget, |key, meta| {
                visited += 1;
                f(key, meta)
            })?;
            if stopped.is_some() {
                return Ok(stopped);
            }
            budget = budget.saturating_sub(visited + 1);
            slot += 1;
            if budget == 0 && slot <= last {
                prefix.truncate(slot_start);
                prefix[2..4].copy_from_slice(&slot.to_be_bytes());
                return Ok(Some(prefix));
            }
        }
        Ok(None)
    }
}
