//! A list of distinct byte strings (keys, fields) in the order first seen, each with a value,
//! found by key: what a command or a commit over many keys uses to spot repeats. A scan for the
//! few keys of most commands; past a handful, a hash table, so one command of 50,000 keys
//! (MSET, DEL, HPERSIST) or an I/O thread's turn of hundreds of writes stays linear.

use crate::fast_hash::FastHash;
use smallvec::SmallVec;
use std::collections::HashMap;

/// Distinct keys in the order first seen, each with a value (a batch's keys and their states,
/// say), found by key: by a scan for the few keys of one command, by a hash table for the
/// hundreds of an I/O thread's turn or the thousands of one MSET (a scan there is quadratic:
/// it took a tenth of the server's CPU under SET -P 16).
pub struct KeyList<'a, V> {
    pub list: SmallVec<[(&'a [u8], V); 4]>,
    index: Option<HashMap<&'a [u8], usize, FastHash>>,
}

impl<'a, V> KeyList<'a, V> {
    /// Up to this many keys a scan beats hashing them.
    const SCAN_UPTO: usize = 8;

    /// For up to `keys` keys (more still work).
    pub fn with_capacity(keys: usize) -> KeyList<'a, V> {
        KeyList {
            list: SmallVec::with_capacity(keys),
            index: (keys > Self::SCAN_UPTO)
                .then(|| HashMap::with_capacity_and_hasher(keys, FastHash)),
        }
    }

    pub fn position(&self, key: &[u8]) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(key).copied(),
            None => self.list.iter().position(|(k, _)| *k == key),
        }
    }

    /// Adds `key` unless the list has it; whether it was added (a set's insert).
    pub fn insert(&mut self, key: &'a [u8], value: V) -> bool {
        if self.position(key).is_some() {
            return false;
        }
        self.push(key, value);
        true
    }

    /// Adds a key not in the list yet; returns its position.
    pub fn push(&mut self, key: &'a [u8], value: V) -> usize {
        let at = self.list.len();
        if self.index.is_none() && at == Self::SCAN_UPTO {
            let mut index = HashMap::with_capacity_and_hasher(2 * at, FastHash);
            index.extend(self.list.iter().enumerate().map(|(i, (k, _))| (*k, i)));
            self.index = Some(index);
        }
        if let Some(index) = &mut self.index {
            index.insert(key, at);
        }
        self.list.push((key, value));
        at
    }
}

#[cfg(test)]
mod tests {
    use super::KeyList;
    use proptest::prelude::*;

    proptest! {
        /// A key list finds each key at its first position, whether it was sized for few keys
        /// (a scan, turned into a hash table as it grows) or many (hashed from the start).
        #[test]
        fn finds_what_a_scan_finds(
            keys in proptest::collection::vec(0u8..40, 0..60),
            sized_for in 0usize..30,
        ) {
            let owned: Vec<Vec<u8>> = keys.iter().map(|k| vec![b'k', *k]).collect();
            let mut list = KeyList::with_capacity(sized_for);
            let mut model: Vec<&[u8]> = Vec::new();
            for k in &owned {
                let want = model.iter().position(|m| *m == k.as_slice());
                prop_assert_eq!(list.position(k), want);
                if want.is_none() {
                    prop_assert_eq!(list.push(k, model.len()), model.len());
                    model.push(k);
                }
            }
            let mut set = KeyList::with_capacity(sized_for);
            let mut seen = std::collections::HashSet::new();
            for k in &owned {
                prop_assert_eq!(set.insert(k, ()), seen.insert(k.clone()));
            }
            prop_assert_eq!(set.list.len(), seen.len());
            for (i, k) in model.iter().enumerate() {
                prop_assert_eq!(list.position(k), Some(i));
                prop_assert_eq!(list.list[i].1, i);
            }
        }
    }
}
