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

#[cfg(test)]
mod tests {
    use super::super::encoding::Meta;
    use super::super::{Batch, Storage};
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// Iterates `storage`'s database 0 to the end, `limit` records a call, each call seeking
    /// `prefix` (in its one slot if it holds a whole hash tag, as `cmd::keys` does) or walking
    /// every key as `seeks` says (cycled), and returns how often each key starting with
    /// `prefix` came back.
    fn iterate(
        storage: &Storage,
        prefix: &[u8],
        limit: usize,
        seeks: &[bool],
    ) -> BTreeMap<Vec<u8>, usize> {
        let mut seen = BTreeMap::new();
        let mut after: Option<Vec<u8>> = None;
        for call in 0.. {
            assert!(call < 100_000, "the iteration never ended");
            let note = |key: &[u8], _: &Meta| {
                if key.starts_with(prefix) {
                    *seen.entry(key.to_vec()).or_insert(0) += 1;
                }
                true
            };
            let position = if seeks[call % seeks.len()] {
                let only_slot = crate::slot::prefix_slot(prefix);
                storage.scan_meta_prefixed(0, prefix, only_slot, after.as_deref(), limit, note)
            } else {
                storage.scan_meta(0, after.as_deref(), limit, note)
            };
            match position.unwrap() {
                Some(p) => after = Some(p),
                None => break,
            }
        }
        seen
    }

    /// A key of a few bytes, often after a hash tag, so many keys share a slot and a walk's
    /// position falls before, inside and after a prefix's run in it.
    fn key() -> impl Strategy<Value = Vec<u8>> {
        let tag = prop::sample::select(vec![&b""[..], b"{t}", b"{u}"]);
        let tail = proptest::collection::vec(prop::sample::select(b"ab{}:".to_vec()), 0..4);
        (tag, tail).prop_map(|(tag, tail)| [tag, &tail[..]].concat())
    }

    /// A walk that stopped in a slot before the prefix's run there (at `{t}`, ahead of
    /// `{t}a`), then a seek of `{t}b` in that one slot: the seek starts at the run, not at
    /// the walk's position, from which the first key it meets is outside the run.
    #[test]
    fn a_seek_after_a_walk_that_stopped_before_the_run_starts_at_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::open(dir.path()).unwrap();
        let mut batch = Batch::default();
        for key in ["{t}", "{t}a", "{t}b1", "{t}b2"] {
            batch.put_meta(&storage, 0, key.as_bytes(), &Meta::string(b"v".to_vec(), 0));
        }
        storage.commit(batch).unwrap();
        let found = iterate(&storage, b"{t}b", 1, &[false, true]);
        let want: BTreeMap<Vec<u8>, usize> = [(b"{t}b1".to_vec(), 1), (b"{t}b2".to_vec(), 1)]
            .into_iter()
            .collect();
        assert_eq!(found, want);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// Seeking a prefix slot by slot returns exactly the keys with that prefix, each once,
        /// whatever the call size, and an iteration that switches between seeking and walking
        /// from one call to the next does too (the positions of both are raw keys).
        #[test]
        fn seeking_a_prefix_finds_what_walking_finds(
            keys in proptest::collection::btree_set(key(), 0..80),
            prefix in key().prop_filter("not empty", |p| !p.is_empty()),
            limit in 1usize..20,
            seeks in proptest::collection::vec(any::<bool>(), 1..4),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let storage = Storage::open(dir.path()).unwrap();
            let mut batch = Batch::default();
            for key in &keys {
                batch.put_meta(&storage, 0, key, &Meta::string(b"v".to_vec(), 0));
            }
            storage.commit(batch).unwrap();
            let want: BTreeMap<Vec<u8>, usize> = keys
                .iter()
                .filter(|k| k.starts_with(&prefix))
                .map(|k| (k.clone(), 1))
                .collect();
            prop_assert_eq!(&iterate(&storage, &prefix, limit, &[true]), &want);
            prop_assert_eq!(&iterate(&storage, &prefix, limit, &seeks), &want);
        }
    }
}
