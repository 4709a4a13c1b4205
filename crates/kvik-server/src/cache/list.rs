//! A list as the hot cache holds it: its meta record (version, length, head position) and its
//! first elements. LRANGE, LINDEX and LLEN of the list's head answer from it on an I/O thread
//! instead of walking a RocksDB iterator (about 0.3 us an element).
//!
//! Why the head and not the whole list: lists are read from their ends (a timeline's latest
//! items, a queue's next ones, redis-benchmark's LRANGE_100..600), and a long list's head is
//! what fits an entry. The held elements are always the list's first `held()` ones, so an
//! index below `held()` is answered and any other is a miss. Pushes, pops and trims edit the
//! copy in place with their commit ([`CachedList::apply`]: O(1) per element at either end, so
//! a write of a list with a long cached head costs no more than one without); other writes
//! drop it.

use crate::storage::encoding::{Kind, Meta};
use bytes::Bytes;
use std::collections::VecDeque;

/// Most bytes of elements a list's cached head holds; the elements past them are not held.
pub const LIST_HEAD_MAX_BYTES: usize = 64 << 10;

/// The first elements of a list, with the list's meta record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedList {
    pub version: u64,
    /// The whole list's length.
    pub len: u64,
    /// The position of its first element (see `storage::encoding::list_index`).
    pub head: u64,
    elems: VecDeque<Bytes>,
    /// Bytes of the held elements.
    bytes: usize,
}

/// A write's change of a list at its ends, for its cached copy (see [`CachedList::apply`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListEdit {
    PushFront(Bytes),
    PushBack(Bytes),
    /// This many elements popped from the head.
    PopFront(u64),
    /// This many popped from the tail.
    PopBack(u64),
    /// LTRIM to indexes `.0..=.1`, both in range.
    Trim(u64, u64),
}

impl CachedList {
    /// An empty copy of the list `meta` describes: elements are then pushed in order.
    pub fn new(meta: &Meta) -> CachedList {
        CachedList {
            version: meta.version,
            len: meta.len,
            head: meta.head,
            elems: VecDeque::new(),
            bytes: 0,
        }
    }

    /// Appends the next element of the list (the one at index `held()`), if the copy has
    /// room for it under [`LIST_HEAD_MAX_BYTES`]; false if not.
    pub fn push(&mut self, elem: &[u8]) -> bool {
        debug_assert!((self.elems.len() as u64) < self.len);
        if self.bytes + elem.len() > LIST_HEAD_MAX_BYTES {
            return false;
        }
        self.bytes += elem.len();
        self.elems.push_back(Bytes::copy_from_slice(elem));
        true
    }

    /// How many of the first elements are held.
    pub fn held(&self) -> usize {
        self.elems.len()
    }

    /// Memory the held elements take: their bytes, the queue's slots for their handles, and
    /// each one's allocation rounded up by the allocator (counted as 16 bytes).
    pub fn mem_size(&self) -> usize {
        self.bytes + self.elems.capacity() * std::mem::size_of::<Bytes>() + self.elems.len() * 16
    }

    /// Element `i`, if held.
    pub fn get(&self, i: u64) -> Option<&[u8]> {
        self.elems.get(usize::try_from(i).ok()?).map(|b| &b[..])
    }

    /// Elements `start..=end`, if all held.
    pub fn range(&self, start: u64, end: u64) -> Option<impl ExactSizeIterator<Item = &[u8]> + '_> {
        let held = start <= end && end < self.held() as u64;
        held.then(|| {
            self.elems
                .range(start as usize..=end as usize)
                .map(|b| &b[..])
        })
    }

    /// The list's meta record, given its expiry.
    pub fn meta(&self, expire_at_ms: u64) -> Meta {
        Meta {
            len: self.len,
            head: self.head,
            ..Meta::collection(Kind::List, self.version, expire_at_ms)
        }
    }

    /// Applies a write's `edits`, in order, keeping at most `max` elements and
    /// [`LIST_HEAD_MAX_BYTES`] (none, if the list's new first element was not held: a head of
    /// no elements still answers LLEN and a writer's meta). False for edits that do not fit
    /// the list: the copy is then unusable (the caller drops it). The caller checks the new
    /// length and head against the write's meta record.
    pub fn apply(&mut self, edits: &[ListEdit], max: usize) -> bool {
        for e in edits {
            // Whether the copy holds the whole list (then a push at the back is held too).
            let whole = self.elems.len() as u64 == self.len;
            match e {
                ListEdit::PushFront(v) => {
                    self.bytes += v.len();
                    self.elems.push_front(v.clone());
                    self.head = self.head.wrapping_sub(1);
                    self.len += 1;
                }
                ListEdit::PushBack(v) => {
                    if whole {
                        self.bytes += v.len();
                        self.elems.push_back(v.clone());
                    }
                    self.len += 1;
                }
                &ListEdit::PopFront(n) => {
                    let Some(len) = self.len.checked_sub(n) else {
                        return false;
                    };
                    self.len = len;
                    self.head = self.head.wrapping_add(n);
                    self.drop_front(n);
                }
                &ListEdit::PopBack(n) => {
                    let Some(len) = self.len.checked_sub(n) else {
                        return false;
                    };
                    self.len = len;
                    self.keep_front(len);
                }
                &ListEdit::Trim(start, end) => {
                    if start > end || end >= self.len {
                        return false;
                    }
                    self.drop_front(start);
                    self.len = end - start + 1;
                    self.head = self.head.wrapping_add(start);
                    self.keep_front(self.len);
                }
            }
        }
        self.keep_front(max as u64);
        while self.bytes > LIST_HEAD_MAX_BYTES {
            self.drop_back();
        }
        true
    }

    fn drop_front(&mut self, n: u64) {
        for _ in 0..n.min(self.elems.len() as u64) {
            if let Some(v) = self.elems.pop_front() {
                self.bytes -= v.len();
            }
        }
    }

    fn keep_front(&mut self, n: u64) {
        while self.elems.len() as u64 > n {
            self.drop_back();
        }
    }

    fn drop_back(&mut self) {
        if let Some(v) = self.elems.pop_back() {
            self.bytes -= v.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(elems: &[&str], len: u64, head: u64) -> CachedList {
        let meta = Meta {
            len,
            head,
            ..Meta::collection(Kind::List, 7, 0)
        };
        let mut l = CachedList::new(&meta);
        for e in elems {
            l.push(e.as_bytes());
        }
        l
    }

    fn held(l: &CachedList) -> Vec<String> {
        (0..l.held() as u64)
            .map(|i| String::from_utf8(l.get(i).unwrap().to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn elements_and_ranges_are_the_held_ones() {
        let l = list(&["a", "bb", "", "d"], 10, 100);
        assert_eq!(l.get(1), Some(&b"bb"[..]));
        assert_eq!(l.get(2), Some(&b""[..]));
        assert_eq!(l.get(4), None);
        let r: Vec<&[u8]> = l.range(1, 3).unwrap().collect();
        assert_eq!(r, vec![&b"bb"[..], &b""[..], &b"d"[..]]);
        assert!(l.range(2, 4).is_none(), "index 4 is not held");
        let m = l.meta(5);
        assert_eq!(
            (m.kind, m.version, m.len, m.head, m.expire_at_ms),
            (Kind::List, 7, 10, 100, 5)
        );
    }

    /// `l` after `edits` with at most `max` elements held, or `None` if they did not fit.
    fn edited(l: &CachedList, edits: &[ListEdit], max: usize) -> Option<CachedList> {
        let mut l = l.clone();
        l.apply(edits, max).then_some(l)
    }

    fn v(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn pushes_and_pops_at_the_ends_edit_the_head() {
        use ListEdit::*;
        // The whole list [a b c]: a push at the back is held.
        let l = list(&["a", "b", "c"], 3, 100);
        let e = edited(&l, &[PushFront(v("z")), PushBack(v("d"))], 10).unwrap();
        assert_eq!(held(&e), ["z", "a", "b", "c", "d"]);
        assert_eq!((e.len, e.head), (5, 99));
        // Capped at `max`: the head only.
        let e = edited(&l, &[PushFront(v("z"))], 2).unwrap();
        assert_eq!(held(&e), ["z", "a"]);
        assert_eq!(e.len, 4);
        // ... and at the byte limit.
        let big = Bytes::from(vec![b'x'; LIST_HEAD_MAX_BYTES]);
        let e = edited(&l, &[PushFront(big)], 10).unwrap();
        assert_eq!((e.held(), e.len), (1, 4));
        assert!(e.mem_size() >= LIST_HEAD_MAX_BYTES + std::mem::size_of::<Bytes>());
        // A head of a longer list: a push at the back is not held, pops at the back shrink it
        // only once they reach it.
        let l = list(&["a", "b"], 4, 0);
        let e = edited(&l, &[PushBack(v("x")), PopBack(1)], 10).unwrap();
        assert_eq!((held(&e), e.len), (vec!["a".to_string(), "b".into()], 4));
        let e = edited(&l, &[PopBack(3)], 10).unwrap();
        assert_eq!((held(&e), e.len), (vec!["a".to_string()], 1));
        let e = edited(&l, &[PopFront(1)], 10).unwrap();
        assert_eq!((held(&e), e.len, e.head), (vec!["b".to_string()], 3, 1));
        // Popped past what is held: nothing held, the length and head still known.
        let e = edited(&l, &[PopFront(3)], 10).unwrap();
        assert_eq!((e.held(), e.len, e.head), (0, 1, 3));
        // Then a push at the front is the whole list again, and one at the back is held.
        let e = edited(&l, &[PopFront(4), PushFront(v("n")), PushBack(v("m"))], 10).unwrap();
        assert_eq!((held(&e), e.len), (vec!["n".to_string(), "m".into()], 2));
        assert!(
            edited(&l, &[PopBack(5)], 10).is_none(),
            "more pops than elements"
        );
    }

    #[test]
    fn trims_keep_the_held_elements_in_range() {
        use ListEdit::*;
        let l = list(&["a", "b", "c"], 6, 10);
        let e = edited(&l, &[Trim(1, 4)], 10).unwrap();
        assert_eq!(
            (held(&e), e.len, e.head),
            (vec!["b".to_string(), "c".into()], 4, 11)
        );
        let e = edited(&l, &[Trim(0, 1)], 10).unwrap();
        assert_eq!((held(&e), e.len), (vec!["a".to_string(), "b".into()], 2));
        // A trim to the element just past the held ones keeps none of them, and is known.
        let e = edited(&l, &[Trim(3, 5)], 10).unwrap();
        assert_eq!((e.held(), e.len, e.head), (0, 3, 13));
        let e = edited(&l, &[Trim(4, 5)], 10).unwrap();
        assert_eq!((e.held(), e.len, e.head), (0, 2, 14));
        assert!(edited(&l, &[Trim(4, 6)], 10).is_none(), "past the end");
        // A timeline: push at the front, trim to the newest three.
        let l = list(&["c", "b", "a"], 3, 0);
        let e = edited(&l, &[PushFront(v("d")), Trim(0, 2)], 10).unwrap();
        assert_eq!(
            (held(&e), e.len),
            (vec!["d".to_string(), "c".into(), "b".into()], 3)
        );
    }
}
