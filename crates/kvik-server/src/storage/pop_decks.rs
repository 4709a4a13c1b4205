//! A random order of a set's members, drawn once, that SPOP takes from and SRANDMEMBER
//! samples (ZRANDMEMBER the same for a sorted set's members). A random member of a set stored in RocksDB costs a walk of seeks
//! (`cmd::collection::Sampler`), each stepping over the tombstones of the members popped
//! before, so a set emptied by SPOP ran at a twentieth of redis-server's rate, and SRANDMEMBER
//! at a tenth (docs/benchmarks.md section 43). The first SPOP or SRANDMEMBER of a set of at
//! most [`MAX_DECK_MEMBERS`] reads it once and shuffles it into a deck; later pops take from
//! the deck's end, later reads draw cards at random places.
//!
//! The deck stays a uniform random order of the set's members: a member written to the set
//! ([`PopDecks::wrote`], from `Batch::put_member`) goes to a uniformly random place among those
//! not taken yet, unless it still has a card (removed and added again: its card is valid
//! again). A member removed by anything else keeps its card; pops and reads check each card
//! against the set and pass over those no longer in it. Writes that do not pass
//! through `Batch` drop decks: a replica's applied batch those of the sets it changes, a full
//! sync all of them, as does a write that failed or a transaction rolled back. Sets are told apart by their storage
//! prefix, which holds their version (unique per set). In memory only, bounded by
//! [`MAX_BYTES`].

use crate::fast_hash::FastHash;
use bytes::Bytes;
use parking_lot::Mutex;
use rand::Rng;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

/// The biggest set dealt into a deck; bigger ones are sampled by walks.
pub const MAX_DECK_MEMBERS: u64 = 65_536;

/// Memory all decks may hold (member bytes plus [`CARD_OVERHEAD`] each); a deal past it drops
/// the others first, and a set whose members alone pass it is not dealt.
pub const MAX_BYTES: usize = 16 << 20;

/// Decks kept at most; a deal past it drops the others first.
const MAX_DECKS: usize = 4096;

/// What one card costs beyond its member's bytes: its handle in the deck and in the set of
/// held members, the table's slot and the allocator's rounding.
const CARD_OVERHEAD: usize = 96;

struct Deck {
    cards: Vec<Bytes>,
    /// The members that have a card, so a member removed and added again keeps its one card
    /// (valid again) rather than getting a second that would double its chance.
    held: HashSet<Bytes, FastHash>,
    /// The set's version (its bit in [`PopDecks::versions`]).
    version: u64,
    bytes: usize,
}

#[derive(Default)]
struct Decks {
    by_set: HashMap<Vec<u8>, Deck, FastHash>,
    bytes: usize,
    /// Sets a read could not deal (no room): not read again for a deck until the decks are
    /// dropped (at most [`MAX_DECKS`], then forgotten).
    refused: HashSet<Vec<u8>, FastHash>,
}

#[derive(Default)]
pub struct PopDecks {
    /// Bit `version % 64` of every set with a deck: a write to a collection whose bit is clear
    /// (nearly every write while few sets have decks) skips the lock and the prefix.
    versions: AtomicU64,
    decks: Mutex<Decks>,
}

/// The memory a card of `member` takes.
pub fn card_bytes(member: &[u8]) -> usize {
    member.len() + CARD_OVERHEAD
}

/// A collection's storage prefix without its version (its last 8 bytes): the key it holds.
pub fn without_version(prefix: &[u8]) -> &[u8] {
    &prefix[..prefix.len().saturating_sub(8)]
}

fn version_bit(version: u64) -> u64 {
    1 << (version % 64)
}

impl PopDecks {
    /// The next card of the deck of the set at `prefix`; `None` if it has no deck. A deck is
    /// dropped with its last card. The card may name a member removed since.
    pub fn take(&self, prefix: &[u8]) -> Option<Vec<u8>> {
        if self.versions.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut decks = self.decks.lock();
        let deck = decks.by_set.get_mut(prefix)?;
        let card = deck.cards.pop()?;
        deck.held.remove(&card);
        deck.bytes -= card_bytes(&card);
        let used_up = deck.cards.is_empty();
        decks.bytes -= card_bytes(&card);
        if used_up {
            self.drop_deck(&mut decks, prefix);
        }
        Some(card.to_vec())
    }

    /// Returns `card`, just taken, to the top of the set's deck (a command that took it could
    /// not finish on an I/O thread and runs again on a worker). Lost with a deck dropped
    /// meanwhile: the next deal reads the set again.
    pub fn put_back(&self, prefix: &[u8], card: Vec<u8>) {
        let mut decks = self.decks.lock();
        let Some(deck) = decks.by_set.get_mut(prefix) else {
            return;
        };
        let bytes = card_bytes(&card);
        let card = Bytes::from(card);
        if deck.held.insert(card.clone()) {
            deck.cards.push(card);
            deck.bytes += bytes;
            decks.bytes += bytes;
        }
    }

    /// Makes `cards` (the members of the set at `prefix`, of `version`, in any order) its
    /// deck, shuffled. Returns false, keeping nothing, if they pass [`MAX_BYTES`] on their own.
    pub fn deal(&self, prefix: Vec<u8>, version: u64, cards: Vec<Vec<u8>>) -> bool {
        let bytes: usize = prefix.len() + cards.iter().map(|c| card_bytes(c)).sum::<usize>();
        if bytes > MAX_BYTES {
            return false;
        }
        let mut cards: Vec<Bytes> = cards.into_iter().map(Bytes::from).collect();
        rand::seq::SliceRandom::shuffle(&mut cards[..], &mut rand::thread_rng());
        let held = cards.iter().cloned().collect();
        let mut decks = self.decks.lock();
        self.drop_deck(&mut decks, &prefix);
        if decks.bytes + bytes > MAX_BYTES || decks.by_set.len() >= MAX_DECKS {
            self.drop_all(&mut decks);
        }
        let deck = Deck {
            cards,
            held,
            version,
            bytes,
        };
        decks.by_set.insert(prefix, deck);
        decks.bytes += bytes;
        self.versions
            .fetch_or(version_bit(version), Ordering::AcqRel);
        true
    }

    /// Whether a read may deal the set at `prefix`: reads fill at most half of [`MAX_BYTES`]
    /// and of [`MAX_DECKS`], never dropping other decks, and a set once refused is not dealt
    /// by reads again (until the decks are dropped).
    pub fn may_deal_for_reads(&self, prefix: &[u8]) -> bool {
        let decks = self.decks.lock();
        decks.bytes < MAX_BYTES / 2
            && decks.by_set.len() < MAX_DECKS / 2
            && !decks.refused.contains(prefix)
    }

    /// [`PopDecks::deal`] for a read: only into room left (see
    /// [`PopDecks::may_deal_for_reads`]); a set that does not fit is remembered as refused.
    pub fn deal_for_reads(&self, prefix: Vec<u8>, version: u64, cards: Vec<Vec<u8>>) -> bool {
        let bytes: usize = prefix.len() + cards.iter().map(|c| card_bytes(c)).sum::<usize>();
        {
            let mut decks = self.decks.lock();
            if decks.bytes + bytes > MAX_BYTES / 2 || decks.by_set.len() >= MAX_DECKS / 2 {
                if decks.refused.len() >= MAX_DECKS {
                    decks.refused.clear();
                }
                decks.refused.insert(prefix);
                return false;
            }
        }
        self.deal(prefix, version, cards)
    }

    /// Whether any deck exists.
    pub fn any(&self) -> bool {
        self.versions.load(Ordering::Acquire) != 0
    }

    /// Whether the set at `prefix` has a deck.
    pub fn has(&self, prefix: &[u8]) -> bool {
        self.versions.load(Ordering::Acquire) != 0 && self.decks.lock().by_set.contains_key(prefix)
    }

    /// `n` cards of the set's deck at random, from distinct places when `distinct`, for reads
    /// (SRANDMEMBER), which leave the deck as it is. `None` without a deck, or when `distinct`
    /// asks for more than a quarter of it (one pass over the set serves that better).
    pub fn sample(&self, prefix: &[u8], n: usize, distinct: bool) -> Option<Vec<Vec<u8>>> {
        if self.versions.load(Ordering::Acquire) == 0 {
            return None;
        }
        let decks = self.decks.lock();
        let cards = &decks.by_set.get(prefix)?.cards;
        let len = cards.len();
        if len == 0 || (distinct && n > len / 4) {
            return None;
        }
        let mut rng = rand::thread_rng();
        Some(if distinct {
            rand::seq::index::sample(&mut rng, len, n)
                .iter()
                .map(|i| cards[i].to_vec())
                .collect()
        } else {
            (0..n)
                .map(|_| cards[rng.gen_range(0..len)].to_vec())
                .collect()
        })
    }

    /// Drops the deck of the set at `prefix` (a read found too many of its cards stale).
    pub fn forget(&self, prefix: &[u8]) {
        self.drop_deck(&mut self.decks.lock(), prefix);
    }

    /// Whether the collection of `version` may have a deck: a writer asks before it builds
    /// the prefix to tell [`PopDecks::wrote`].
    pub fn may_hold(&self, version: u64) -> bool {
        self.versions.load(Ordering::Acquire) & version_bit(version) != 0
    }

    /// `member` is being written to the collection at `prefix`: if that is a set with a deck,
    /// the member goes to a uniformly random place among the cards not taken yet (the last
    /// step of a Fisher-Yates shuffle), so the deck stays a uniform order of the set.
    pub fn wrote(&self, prefix: &[u8], member: &[u8]) {
        let mut decks = self.decks.lock();
        let Some(deck) = decks.by_set.get_mut(prefix) else {
            return;
        };
        if deck.held.contains(member) {
            return;
        }
        let bytes = card_bytes(member);
        let card = Bytes::copy_from_slice(member);
        deck.held.insert(card.clone());
        deck.cards.push(card);
        let last = deck.cards.len() - 1;
        let at = rand::thread_rng().gen_range(0..=last);
        deck.cards.swap(at, last);
        deck.bytes += bytes;
        decks.bytes += bytes;
        if decks.bytes > MAX_BYTES {
            self.drop_all(&mut decks);
        }
    }

    /// Drops the decks of the collections `written` holds the key part of (their storage
    /// prefixes without the version): a replica applying its primary's writes to them.
    pub fn forget_keys(&self, written: &HashSet<&[u8]>) {
        if self.versions.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut decks = self.decks.lock();
        let gone: Vec<Vec<u8>> = decks
            .by_set
            .keys()
            .filter(|p| written.contains(without_version(p)))
            .cloned()
            .collect();
        for p in gone {
            self.drop_deck(&mut decks, &p);
        }
    }

    /// Drops every deck (writes that bypassed `Batch`).
    pub fn clear(&self) {
        self.drop_all(&mut self.decks.lock());
    }

    /// The memory the decks hold.
    pub fn bytes(&self) -> usize {
        self.decks.lock().bytes
    }

    fn drop_deck(&self, decks: &mut Decks, prefix: &[u8]) {
        let Some(old) = decks.by_set.remove(prefix) else {
            return;
        };
        decks.bytes -= old.bytes;
        let bits = decks
            .by_set
            .values()
            .fold(0, |bits, d| bits | version_bit(d.version));
        self.versions.store(bits, Ordering::Release);
    }

    fn drop_all(&self, decks: &mut Decks) {
        decks.by_set.clear();
        decks.refused.clear();
        decks.bytes = 0;
        self.versions.store(0, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::{PopDecks, MAX_BYTES};
    use std::collections::HashSet;

    #[test]
    fn a_deck_gives_each_card_once_and_takes_in_the_members_written_after_the_deal() {
        let d = PopDecks::default();
        assert_eq!(d.take(b"s1"), None);
        assert!(d.deal(
            b"s1".to_vec(),
            1,
            (0..100u32).map(|i| i.to_be_bytes().to_vec()).collect()
        ));
        d.wrote(b"s1", b"new");
        d.wrote(b"other", b"x");
        let mut seen = HashSet::new();
        while let Some(c) = d.take(b"s1") {
            assert!(seen.insert(c));
        }
        assert_eq!(seen.len(), 101);
        assert!(seen.contains(&b"new"[..]));
        assert_eq!(d.take(b"other"), None);
        assert_eq!(d.bytes(), 0);
        assert!(!d.may_hold(1), "a deck used up is dropped");
    }

    #[test]
    fn a_member_added_again_keeps_its_one_card() {
        let d = PopDecks::default();
        d.deal(b"s".to_vec(), 1, vec![b"a".to_vec(), b"b".to_vec()]);
        d.wrote(b"s", b"a");
        d.wrote(b"s", b"c");
        d.wrote(b"s", b"c");
        let mut all: Vec<Vec<u8>> = std::iter::from_fn(|| d.take(b"s")).collect();
        all.sort();
        assert_eq!(all, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
    }

    #[test]
    fn a_written_member_lands_anywhere_in_the_deck() {
        // Where the member written after the deal comes out, over many deals: every place
        // of 4 (the chance of missing one in 400 tries is below 1e-49).
        let d = PopDecks::default();
        let mut places = HashSet::new();
        for _ in 0..400 {
            d.deal(
                b"s".to_vec(),
                1,
                vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()],
            );
            d.wrote(b"s", b"n");
            let order: Vec<Vec<u8>> = std::iter::from_fn(|| d.take(b"s")).collect();
            places.insert(order.iter().position(|c| c == b"n").unwrap());
        }
        assert_eq!(places.len(), 4);
    }

    #[test]
    fn reads_draw_cards_without_taking_them_and_deal_only_into_room() {
        let d = PopDecks::default();
        assert_eq!(d.sample(b"s", 1, true), None);
        let cards: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i]).collect();
        assert!(d.deal_for_reads(b"s".to_vec(), 1, cards));
        let some = d.sample(b"s", 10, true).unwrap();
        assert_eq!(
            some.iter().collect::<HashSet<_>>().len(),
            10,
            "distinct places"
        );
        assert_eq!(d.sample(b"s", 11, true), None, "more than a quarter");
        assert_eq!(
            d.sample(b"s", 100, false).unwrap().len(),
            100,
            "with repeats"
        );
        let mut left = 0;
        while d.take(b"s").is_some() {
            left += 1;
        }
        assert_eq!(left, 40, "reads take no card");
        let big = vec![vec![0u8; 1 << 20]; 9];
        assert!(d.may_deal_for_reads(b"big"));
        assert!(!d.deal_for_reads(b"big".to_vec(), 2, big));
        assert!(
            !d.may_deal_for_reads(b"big"),
            "refused once, not read again"
        );
        d.clear();
        assert!(d.may_deal_for_reads(b"big"));
    }

    #[test]
    fn decks_stay_within_their_memory() {
        let d = PopDecks::default();
        let big = vec![vec![0u8; 1 << 20]; 17];
        assert!(!d.deal(b"huge".to_vec(), 1, big));
        let half = vec![vec![0u8; 1 << 20]; 9];
        assert!(d.deal(b"a".to_vec(), 2, half.clone()));
        assert!(d.deal(b"b".to_vec(), 3, half));
        assert!(d.bytes() <= MAX_BYTES);
        assert_eq!(
            d.take(b"a"),
            None,
            "the first deck made room for the second"
        );
        assert!(d.take(b"b").is_some());
        d.clear();
        assert_eq!((d.take(b"b"), d.bytes()), (None, 0));
    }
}
