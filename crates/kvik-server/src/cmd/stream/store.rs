//! One stream opened by a command: its meta record and state, reads of its entries and group
//! records, and the changes the command stages, committed with the meta record in one batch.
//!
//! Records a command writes are staged in memory and read back before storage, so a command that
//! touches the same record twice (XCLAIM of one ID given twice, a consumer's pending count moved
//! by several entries) sees its own writes. Scans see committed state only; no command scans what
//! it has already changed. Every record layout is in `storage::stream`.

use crate::cmd::ctx::{CmdError, Ctx};
use crate::storage::encoding::{prefix_successor, Kind, Meta};
use crate::storage::stream::{
    consumer_member, consumer_pel_member, consumer_pel_prefix, consumer_prefix, entry_id,
    entry_member, group_consumer_pel_prefix, group_member, pel_member, pel_prefix, trailing_id,
    ConsumerRec, GroupRec, PendingRec, StreamState, INVALID_ENTRIES_READ, TAG_ENTRY, TAG_GROUP,
};
use crate::storage::{Batch, Cf, Coll, Storage, View, Wait};
use kvik_types::stream_id::StreamId;
use std::collections::BTreeMap;

pub struct Stream<'s, 'k> {
    storage: &'s Storage,
    view: View<'s>,
    pub db: u16,
    pub key: &'k [u8],
    pub meta: Meta,
    pub state: StreamState,
    /// Records this command wrote (`None`: deleted), applied on commit.
    staged: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    batch: Batch,
    dirty: bool,
    /// Whether the meta record exists in storage (false for [`Stream::create`]) and its length
    /// when opened: a quiet commit that left both the length and the state as stored writes
    /// no meta record (XREADGROUP and XACK change only group records).
    stored: bool,
    stored_len: u64,
    quiet: bool,
    /// Whether the commit may wait (not on an I/O thread; see `Mode::NoWait`).
    wait: Wait,
}

impl<'s, 'k> Stream<'s, 'k> {
    fn new(ctx: &Ctx<'s>, view: View<'s>, key: &'k [u8], meta: Meta) -> Self {
        Stream {
            storage: ctx.storage(),
            view,
            db: ctx.db(),
            key,
            state: StreamState::decode(&meta.value),
            stored_len: meta.len,
            meta,
            staged: BTreeMap::new(),
            batch: Batch::default(),
            dirty: false,
            stored: true,
            quiet: false,
            wait: ctx.wait(),
        }
    }

    /// The stream for a read command (a snapshot; counts a keyspace hit or miss; WRONGTYPE for
    /// another kind).
    pub fn read(ctx: &Ctx<'s>, key: &'k [u8]) -> Result<Option<Self>, CmdError> {
        Ok(ctx
            .read_collection(key, Kind::Stream)?
            .map(|(view, meta)| Self::new(ctx, view, key, meta)))
    }

    /// The stream for a write command; the caller holds the key's lock.
    pub fn write(ctx: &Ctx<'s>, key: &'k [u8]) -> Result<Option<Self>, CmdError> {
        Ok(ctx
            .write_collection(key, Kind::Stream)?
            .map(|meta| Self::new(ctx, ctx.latest(), key, meta)))
    }

    /// A new empty stream under a fresh version (written on commit); the caller holds the lock.
    pub fn create(ctx: &Ctx<'s>, key: &'k [u8]) -> Result<Self, CmdError> {
        let version = ctx.next_version()?;
        let meta = Meta::collection(Kind::Stream, version, 0);
        let mut s = Self::new(ctx, ctx.latest(), key, meta);
        s.dirty = true;
        s.stored = false;
        Ok(s)
    }

    fn coll(&self) -> Coll<'k> {
        Coll::new(self.db, self.key, &self.meta)
    }

    /// Number of entries.
    pub fn len(&self) -> u64 {
        self.meta.len
    }

    /// Marks the stream written (its meta record is put on commit even if nothing else changed).
    pub fn touch(&mut self) {
        self.dirty = true;
    }

    /// [`Stream::commit`] for consumer-group bookkeeping and XSETID, which Redis 7.0 does not
    /// signal as a modification: WATCH and client tracking do not see it (`Batch::quiet`).
    pub fn commit_quiet(mut self) -> Result<(), CmdError> {
        self.batch.quiet();
        self.quiet = true;
        self.commit()
    }

    /// Writes the staged changes and the meta record in one batch, if anything changed.
    pub fn commit(mut self) -> Result<(), CmdError> {
        if !self.dirty {
            return Ok(());
        }
        let coll = self.coll();
        for (m, v) in &self.staged {
            match v {
                Some(v) => self.batch.put_member(self.storage, Cf::Data, &coll, m, v),
                None => self.batch.delete_member(self.storage, Cf::Data, &coll, m),
            }
        }
        let value = self.state.encode();
        let meta_unchanged = self.quiet
            && self.stored
            && self.meta.len == self.stored_len
            && value == self.meta.value;
        if meta_unchanged && self.staged.is_empty() {
            return Ok(());
        }
        if !meta_unchanged {
            self.meta.value = value;
            self.batch
                .put_meta(self.storage, self.db, self.key, &self.meta);
        }
        self.storage
            .commit_with(std::mem::take(&mut self.batch), self.wait)?;
        Ok(())
    }

    // ---- records --------------------------------------------------------------------------

    fn get(&self, member: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
        if let Some(v) = self.staged.get(member) {
            return Ok(v.clone());
        }
        Ok(self.view.get_member(&self.coll(), member)?)
    }

    fn put(&mut self, member: Vec<u8>, value: Vec<u8>) {
        self.staged.insert(member, Some(value));
        self.dirty = true;
    }

    fn delete(&mut self, member: Vec<u8>) {
        self.staged.insert(member, None);
        self.dirty = true;
    }

    /// Calls `f(member, value)` for the committed records starting with `prefix`, from `from`
    /// (a member, or the prefix itself) on, until it returns false.
    fn scan(
        &self,
        prefix: &[u8],
        from: &[u8],
        mut f: impl FnMut(&[u8], &[u8]) -> Result<bool, CmdError>,
    ) -> Result<(), CmdError> {
        let mut c = self.view.members(Cf::Data, &self.coll());
        c.seek(from);
        while let Some((m, v)) = c.entry() {
            if !m.starts_with(prefix) || !f(m, v)? {
                break;
            }
            c.next();
        }
        Ok(c.status()?)
    }

    /// Deletes every committed record starting with `prefix` (one range tombstone).
    fn delete_prefix(&mut self, prefix: &[u8]) {
        let end = prefix_successor(prefix).expect("tagged prefixes end below 0xff");
        let coll = self.coll();
        self.batch
            .delete_member_range(self.storage, &coll, prefix, &end);
        self.dirty = true;
    }

    // ---- entries --------------------------------------------------------------------------

    /// An entry's encoded fields.
    pub fn entry(&self, id: StreamId) -> Result<Option<Vec<u8>>, CmdError> {
        self.get(&entry_member(id))
    }

    /// Stages a new entry (above every existing ID).
    pub fn add_entry(&mut self, id: StreamId, fields: Vec<u8>) {
        if self.meta.len == 0 {
            self.state.first_id = id;
        }
        self.meta.len += 1;
        self.put(entry_member(id).to_vec(), fields);
    }

    /// Stages the deletion of an existing entry (the caller updates `first_id`).
    pub fn delete_entry(&mut self, id: StreamId) {
        self.meta.len = self.meta.len.saturating_sub(1);
        self.delete(entry_member(id).to_vec());
    }

    /// Deletes the committed entries from `from` up to `to` (exclusive; `None`: to the end) with
    /// one range tombstone; the caller updates the length and `first_id`.
    pub fn delete_entry_range(&mut self, from: StreamId, to: Option<StreamId>) {
        let coll = self.coll();
        let end = match to {
            Some(id) => entry_member(id).to_vec(),
            None => vec![TAG_ENTRY + 1],
        };
        self.batch
            .delete_member_range(self.storage, &coll, &entry_member(from), &end);
        self.dirty = true;
    }

    /// Calls `f(id, fields)` for the committed entries from `start` to `end` (inclusive), in
    /// order or (`rev`) from `end` down, until it returns false.
    pub fn entries(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        mut f: impl FnMut(StreamId, &[u8]) -> Result<bool, CmdError>,
    ) -> Result<(), CmdError> {
        // Nothing lives below the first entry: starting there never walks the tombstones that
        // trimming from the head left behind (until compaction drops them).
        let start = if self.len() > 0 {
            start.max(self.state.first_id)
        } else {
            start
        };
        if start > end {
            return Ok(());
        }
        let mut c = self.view.members(Cf::Data, &self.coll());
        if rev {
            c.seek_back(&entry_member(end));
        } else {
            c.seek(&entry_member(start));
        }
        while let Some((m, v)) = c.entry() {
            let Some(id) = entry_id(m) else { break };
            if id < start || id > end || !f(id, v)? {
                break;
            }
            if rev {
                c.prev();
            } else {
                c.next();
            }
        }
        Ok(c.status()?)
    }

    /// The first or (`last`) the last committed entry's ID.
    pub fn edge_id(&self, last: bool) -> Result<Option<StreamId>, CmdError> {
        let mut found = None;
        self.entries(StreamId::MIN, StreamId::MAX, last, |id, _| {
            found = Some(id);
            Ok(false)
        })?;
        Ok(found)
    }

    /// The ID of the last entry, or 0-0 for an empty stream (Redis's `streamLastValidID`).
    pub fn last_entry_id(&self) -> Result<StreamId, CmdError> {
        if self.len() == 0 {
            return Ok(StreamId::MIN);
        }
        Ok(self.edge_id(true)?.unwrap_or(StreamId::MIN))
    }

    // ---- groups ---------------------------------------------------------------------------

    pub fn group(&self, name: &[u8]) -> Result<Option<GroupRec>, CmdError> {
        Ok(self.get(&group_member(name))?.map(|v| GroupRec::decode(&v)))
    }

    pub fn put_group(&mut self, name: &[u8], g: &GroupRec) {
        self.put(group_member(name), g.encode());
    }

    /// Calls `f(name, group)` for every committed group, in name order.
    pub fn groups(
        &self,
        mut f: impl FnMut(&[u8], GroupRec) -> Result<(), CmdError>,
    ) -> Result<(), CmdError> {
        self.scan(&[TAG_GROUP], &[TAG_GROUP], |m, v| {
            f(&m[1..], GroupRec::decode(v))?;
            Ok(true)
        })
    }

    pub fn group_count(&self) -> Result<u64, CmdError> {
        let mut n = 0;
        self.groups(|_, _| {
            n += 1;
            Ok(())
        })?;
        Ok(n)
    }

    /// Deletes a group with its consumers and pending entries.
    pub fn destroy_group(&mut self, name: &[u8]) {
        self.delete(group_member(name));
        for prefix in [
            pel_prefix(name),
            consumer_prefix(name),
            group_consumer_pel_prefix(name),
        ] {
            self.delete_prefix(&prefix);
        }
    }

    // ---- consumers ------------------------------------------------------------------------

    pub fn consumer(&self, group: &[u8], name: &[u8]) -> Result<Option<ConsumerRec>, CmdError> {
        Ok(self
            .get(&consumer_member(group, name))?
            .map(|v| ConsumerRec::decode(&v)))
    }

    pub fn put_consumer(&mut self, group: &[u8], name: &[u8], c: &ConsumerRec) {
        self.put(consumer_member(group, name), c.encode());
    }

    /// The consumer `name`, created if missing (one more in `g.consumers`), seen at `now_ms`
    /// (Redis's lookup with refresh, or create). Returns whether it was created.
    pub fn seen_consumer(
        &mut self,
        group: &[u8],
        g: &mut GroupRec,
        name: &[u8],
        now_ms: u64,
    ) -> Result<bool, CmdError> {
        let (mut c, created) = match self.consumer(group, name)? {
            Some(c) => (c, false),
            None => {
                g.consumers += 1;
                (ConsumerRec::default(), true)
            }
        };
        c.seen_ms = now_ms;
        self.put_consumer(group, name, &c);
        Ok(created)
    }

    /// Every committed consumer of `group` with its record, in name order (replies need the
    /// count before the first consumer, so every caller wants them all).
    pub fn consumers(&self, group: &[u8]) -> Result<Vec<(Vec<u8>, ConsumerRec)>, CmdError> {
        let prefix = consumer_prefix(group);
        let mut all = Vec::new();
        self.scan(&prefix, &prefix, |m, v| {
            all.push((m[prefix.len()..].to_vec(), ConsumerRec::decode(v)));
            Ok(true)
        })?;
        Ok(all)
    }

    /// Deletes consumer `name` of `group` and its pending entries; returns how many it had.
    pub fn delete_consumer(
        &mut self,
        group: &[u8],
        g: &mut GroupRec,
        name: &[u8],
    ) -> Result<u64, CmdError> {
        let Some(c) = self.consumer(group, name)? else {
            return Ok(0);
        };
        let mut ids = Vec::new();
        self.consumer_pel(group, name, StreamId::MIN, |id| {
            ids.push(id);
            Ok(true)
        })?;
        for id in &ids {
            self.delete(pel_member(group, *id));
        }
        g.pending = g.pending.saturating_sub(ids.len() as u64);
        g.consumers = g.consumers.saturating_sub(1);
        self.delete(consumer_member(group, name));
        self.delete_prefix(&consumer_pel_prefix(group, name));
        Ok(c.pending)
    }

    // ---- pending entries ------------------------------------------------------------------

    pub fn pending(&self, group: &[u8], id: StreamId) -> Result<Option<PendingRec>, CmdError> {
        Ok(self
            .get(&pel_member(group, id))?
            .map(|v| PendingRec::decode(&v)))
    }

    /// Calls `f(id, entry)` for the committed pending entries of `group` from `from` on.
    pub fn pel(
        &self,
        group: &[u8],
        from: StreamId,
        mut f: impl FnMut(StreamId, PendingRec) -> Result<bool, CmdError>,
    ) -> Result<(), CmdError> {
        let prefix = pel_prefix(group);
        self.scan(&prefix, &pel_member(group, from), |m, v| {
            f(trailing_id(m).unwrap_or_default(), PendingRec::decode(v))
        })
    }

    /// The largest committed pending ID of `group` (one seek from the end of its PEL).
    pub fn last_pending_id(&self, group: &[u8]) -> Result<Option<StreamId>, CmdError> {
        let prefix = pel_prefix(group);
        let end = prefix_successor(&prefix).expect("tagged prefixes end below 0xff");
        let mut c = self.view.members(Cf::Data, &self.coll());
        c.seek_back(&end);
        let found = c
            .entry()
            .filter(|(m, _)| m.starts_with(&prefix))
            .and_then(|(m, _)| trailing_id(m));
        c.status()?;
        Ok(found)
    }

    /// Calls `f(id)` for the committed pending entries of consumer `name` from `from` on.
    pub fn consumer_pel(
        &self,
        group: &[u8],
        name: &[u8],
        from: StreamId,
        mut f: impl FnMut(StreamId) -> Result<bool, CmdError>,
    ) -> Result<(), CmdError> {
        let prefix = consumer_pel_prefix(group, name);
        self.scan(&prefix, &consumer_pel_member(group, name, from), |m, _| {
            f(trailing_id(m).unwrap_or_default())
        })
    }

    fn add_consumer_pending(
        &mut self,
        group: &[u8],
        name: &[u8],
        delta: i64,
    ) -> Result<(), CmdError> {
        let mut c = self.consumer(group, name)?.unwrap_or_default();
        c.pending = c.pending.saturating_add_signed(delta);
        self.put_consumer(group, name, &c);
        Ok(())
    }

    /// Stores pending entry `id` of `group` as `rec`; `old` is what was there (its owner loses
    /// it if the owner changes). Keeps the pending counts of the group and the consumers.
    pub fn set_pending(
        &mut self,
        group: &[u8],
        g: &mut GroupRec,
        id: StreamId,
        rec: &PendingRec,
        old: Option<&PendingRec>,
    ) -> Result<(), CmdError> {
        match old {
            Some(o) if o.consumer == rec.consumer => {}
            Some(o) => {
                self.delete(consumer_pel_member(group, &o.consumer, id));
                self.add_consumer_pending(group, &o.consumer, -1)?;
                self.put(consumer_pel_member(group, &rec.consumer, id), Vec::new());
                self.add_consumer_pending(group, &rec.consumer, 1)?;
            }
            None => {
                g.pending += 1;
                self.put(consumer_pel_member(group, &rec.consumer, id), Vec::new());
                self.add_consumer_pending(group, &rec.consumer, 1)?;
            }
        }
        self.put(pel_member(group, id), rec.encode());
        Ok(())
    }

    /// Removes pending entry `id` (owned as `rec` says) from `group` and its consumer.
    pub fn remove_pending(
        &mut self,
        group: &[u8],
        g: &mut GroupRec,
        id: StreamId,
        rec: &PendingRec,
    ) -> Result<(), CmdError> {
        self.delete(pel_member(group, id));
        self.delete(consumer_pel_member(group, &rec.consumer, id));
        self.add_consumer_pending(group, &rec.consumer, -1)?;
        g.pending = g.pending.saturating_sub(1);
        Ok(())
    }

    // ---- logical read counters (Redis 7.0's lag tracking) ---------------------------------

    /// Redis's `streamRangeHasTombstones(s, start, NULL)`: whether an XDEL may have left a gap
    /// at or after `start`.
    pub fn has_tombstones_from(&self, start: StreamId) -> bool {
        let st = &self.state;
        if self.len() == 0 || st.max_deleted == StreamId::MIN || st.first_id > st.max_deleted {
            return false;
        }
        start <= st.max_deleted
    }

    /// Redis's `streamEstimateDistanceFromFirstEverEntry`: the logical counter of `id`, or
    /// [`INVALID_ENTRIES_READ`] when it cannot be known.
    pub fn estimate_entries_read(&self, id: StreamId) -> i64 {
        let st = &self.state;
        let added = st.entries_added as i64;
        if st.entries_added == 0 {
            return 0;
        }
        if self.len() == 0 && id <= st.last_id {
            return added;
        }
        if id == st.last_id {
            return added;
        }
        if id > st.last_id {
            return INVALID_ENTRIES_READ;
        }
        if st.max_deleted == StreamId::MIN || st.max_deleted < st.first_id {
            if id < st.first_id {
                return added - self.len() as i64;
            }
            if id == st.first_id {
                return added - self.len() as i64 + 1;
            }
        }
        INVALID_ENTRIES_READ
    }

    /// The lag of group `g` (XINFO GROUPS), `None` when unknown.
    pub fn lag(&self, g: &GroupRec) -> Option<i64> {
        let added = self.state.entries_added as i64;
        if self.state.entries_added == 0 {
            return Some(0);
        }
        if g.entries_read != INVALID_ENTRIES_READ && !self.has_tombstones_from(g.last_id) {
            return Some(added - g.entries_read);
        }
        match self.estimate_entries_read(g.last_id) {
            INVALID_ENTRIES_READ => None,
            read => Some(added - read),
        }
    }

    /// Moves group `g`'s last-delivered ID to `id` after delivering it (XREADGROUP `>`).
    pub fn advance_group(&self, g: &mut GroupRec, id: StreamId) {
        if id <= g.last_id {
            return;
        }
        if g.entries_read != INVALID_ENTRIES_READ && !self.has_tombstones_from(id) {
            g.entries_read += 1;
        } else if self.state.entries_added != 0 {
            g.entries_read = self.estimate_entries_read(id);
        }
        g.last_id = id;
    }
}
