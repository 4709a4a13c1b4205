//! Moving keys between servers: DUMP, RESTORE, RESTORE-ASKING and MIGRATE.
//!
//! All four are type-blind: they work on storage's [`KeyRecord`] (a key's meta record plus its
//! member entries), so every data type, present or future, dumps and restores the same way.
//!
//! # The payload
//!
//! DUMP does not produce Redis's RDB serialization: kvik stores collections as RocksDB entries,
//! not as Redis objects, so its payload is its own and only restores into kvik. The layout
//! (integers big-endian unless said otherwise):
//!
//! ```text
//! body    = kind (u8) | string: the value bytes
//!                     | collection: len (u64) | head (u64) | entries(data CF) | entries(score CF)
//! entries = count (u32) | count x (member length (u32) | member | value length (u32) | value)
//! payload = body | format version (u16 LE) | CRC-32 of body and version (u32 LE)
//! ```
//!
//! The expiry is not part of the payload (RESTORE's TTL argument carries it, as in Redis), nor
//! is the collection version: RESTORE gives a collection a fresh one. RESTORE refuses a payload
//! whose version or checksum is wrong with Redis's error, and one that decodes badly (or whose
//! entry counts disagree with its length) with "Bad data format".
//!
//! # MIGRATE
//!
//! MIGRATE locks the keys it moves from the moment it reads them until it has deleted them
//! locally, so a concurrent write waits and is then applied on the target (the cluster routing
//! redirects it there) instead of being lost between the export and the delete. It opens a
//! fresh connection per call (no cached sockets), pipelines `[AUTH] SELECT db RESTORE-ASKING
//! key ttl payload [REPLACE] ...`, and deletes (unless COPY) exactly the keys the target
//! acknowledged. Replies and errors are Redis's: `+OK`, `+NOKEY`, `IOERR error or timeout ...`,
//! `ERR Target instance replied with error: ...`.

use super::ctx::{Args, CmdError, CmdResult, Ctx, ErrorKind};
use super::spec::{CacheEffect, Class, CommandSpec, Flags, KeySpec, Routing};
use crate::storage::encoding::{Kind, Meta};
use crate::storage::members::KeyRecord;
use crate::storage::Batch;
use bytes::Bytes;
use kvik_resp::{encode, Frame, Limits};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The payload format version DUMP writes and RESTORE accepts.
pub const DUMP_VERSION: u16 = 1;
/// Bytes after the body: version (2) and CRC-32 (4).
const TRAILER_LEN: usize = 6;

const RESTORE_COMPLEXITY: &str = "O(1) to create the new key and additional O(N*M) to \
     reconstruct the serialized value, where N is the number of Redis objects composing the value \
     and M their average size. For small string values the time complexity is thus O(1)+O(1*M) \
     where M is small, so simply O(1). However for sorted set values the complexity is \
     O(N*M*log(N)) because inserting values into sorted sets is O(log(N)).";

/// MIGRATE's keys: `args[3]`, or everything after KEYS when `args[3]` is empty.
fn migrate_keys(args: &Args) -> Vec<usize> {
    if args.len() > 3 && !args[3].is_empty() {
        return vec![3];
    }
    match (6..args.len()).find(|&i| args[i].eq_ignore_ascii_case(b"keys")) {
        Some(i) => (i + 1..args.len()).collect(),
        None => Vec::new(),
    }
}

const MIGRATE_KEYS: KeySpec = KeySpec {
    first: 3,
    last: 3,
    step: 1,
};

/// RESTORE and RESTORE-ASKING: one handler and shape (the cluster routing treats the second as
/// asked), told apart only by name and docs.
const fn restore_spec(
    name: &'static str,
    group: &'static str,
    summary: &'static str,
    since: &'static str,
) -> CommandSpec {
    CommandSpec::new(
        name,
        -4,
        Flags::WRITE.union(Flags::DENYOOM),
        KeySpec::ONE,
        restore,
    )
    .cache(CacheEffect::Invalidate)
    .event(Class::Generic, "restore")
    .event(Class::Generic, "del")
    .acl(&["keyspace", "write", "slow", "dangerous"])
    .group(group)
    .doc(summary, since, RESTORE_COMPLEXITY)
}

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("dump", 2, Flags::READONLY, KeySpec::ONE, dump)
        .acl(&["keyspace", "read", "slow"])
        .group("generic")
        .doc(
            "Return a serialized version of the value stored at the specified key.",
            "2.6.0",
            "O(1) to access the key and additional O(N*M) to serialize it, where N is the number \
             of Redis objects composing the value and M their average size. For small string \
             values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1).",
        ),
    restore_spec(
        "restore",
        "generic",
        "Create a key using the provided serialized value, previously obtained using DUMP.",
        "2.6.0",
    ),
    restore_spec(
        "restore-asking",
        "server",
        "An internal command for migrating keys in a cluster",
        "3.0.0",
    )
    .routing(Routing::Asked),
    CommandSpec::new("migrate", -6, Flags::WRITE, MIGRATE_KEYS, migrate)
        .event(Class::Generic, "del")
        .movable(migrate_keys)
        .routing(Routing::Migrate)
        .cache(CacheEffect::Invalidate)
        .acl(&["keyspace", "write", "slow", "dangerous"])
        .group("generic")
        .doc(
            "Atomically transfer a key from a Redis instance to another one.",
            "2.6.0",
            "This command actually executes a DUMP+DEL in the source instance, and a RESTORE in \
             the target instance. See the pages of these commands for time complexity. Also an \
             O(N) data transfer between the two instances is performed.",
        ),
];

/* ---- The payload ---- */

fn put_entries(out: &mut Vec<u8>, entries: &Entries) {
    out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
    for (m, v) in entries {
        out.extend_from_slice(&(m.len() as u32).to_be_bytes());
        out.extend_from_slice(m);
        out.extend_from_slice(&(v.len() as u32).to_be_bytes());
        out.extend_from_slice(v);
    }
}

/// Serializes `rec` (its expiry and collection version left out) as DUMP's payload.
pub fn encode_payload(rec: &KeyRecord) -> Vec<u8> {
    let entries_len: usize = rec
        .data
        .iter()
        .chain(&rec.score)
        .map(|(m, v)| 8 + m.len() + v.len())
        .sum();
    let mut out = Vec::with_capacity(1 + 24 + rec.meta.value.len() + entries_len + TRAILER_LEN);
    out.push(rec.meta.kind as u8);
    if rec.meta.kind == Kind::String {
        out.extend_from_slice(&rec.meta.value);
    } else {
        out.extend_from_slice(&rec.meta.len.to_be_bytes());
        // A hash has no head: the word says whether its values carry field TTLs.
        let head = match rec.meta.kind {
            Kind::Hash => u64::from(rec.meta.field_ttls),
            _ => rec.meta.head,
        };
        out.extend_from_slice(&head.to_be_bytes());
        put_entries(&mut out, &rec.data);
        put_entries(&mut out, &rec.score);
        if rec.meta.kind == Kind::Stream {
            // The stream state (last ID, counters) ends the body.
            out.extend_from_slice(&rec.meta.value);
        }
    }
    out.extend_from_slice(&DUMP_VERSION.to_le_bytes());
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Why a payload was refused (each has its Redis error text).
#[derive(Debug, PartialEq, Eq)]
pub enum PayloadError {
    /// Wrong version or checksum.
    Checksum,
    /// Checksummed but not decodable.
    BadFormat,
}

impl From<PayloadError> for CmdError {
    fn from(e: PayloadError) -> CmdError {
        match e {
            PayloadError::Checksum => CmdError::fixed("DUMP payload version or checksum are wrong"),
            PayloadError::BadFormat => CmdError::fixed("Bad data format"),
        }
    }
}

/// Member entries of one column family: (member, value).
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// A cursor over a payload body; every read is bounds-checked.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], PayloadError> {
        if self.buf.len() < n {
            return Err(PayloadError::BadFormat);
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }
    fn u32(&mut self) -> Result<u32, PayloadError> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into().expect("4")))
    }
    fn u64(&mut self) -> Result<u64, PayloadError> {
        Ok(u64::from_be_bytes(self.take(8)?.try_into().expect("8")))
    }
    fn entries(&mut self) -> Result<Entries, PayloadError> {
        let n = self.u32()? as usize;
        // Each entry takes at least 8 bytes: a declared count cannot make us allocate more than
        // the payload's own size.
        if n > self.buf.len() / 8 {
            return Err(PayloadError::BadFormat);
        }
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let ml = self.u32()? as usize;
            let m = self.take(ml)?.to_vec();
            let vl = self.u32()? as usize;
            let v = self.take(vl)?.to_vec();
            out.push((m, v));
        }
        Ok(out)
    }
}

fn kind_from_byte(b: u8) -> Option<Kind> {
    [
        Kind::String,
        Kind::Hash,
        Kind::List,
        Kind::Set,
        Kind::ZSet,
        Kind::Bitmap,
        Kind::Stream,
    ]
    .into_iter()
    .find(|k| *k as u8 == b)
}

/// Checks and decodes a payload into a record with no expiry and version 0.
pub fn decode_payload(payload: &[u8]) -> Result<KeyRecord, PayloadError> {
    if payload.len() < 1 + TRAILER_LEN {
        return Err(PayloadError::Checksum);
    }
    let (signed, crc) = payload.split_at(payload.len() - 4);
    let version = u16::from_le_bytes([signed[signed.len() - 2], signed[signed.len() - 1]]);
    if version != DUMP_VERSION
        || crc32fast::hash(signed) != u32::from_le_bytes(crc.try_into().expect("4"))
    {
        return Err(PayloadError::Checksum);
    }
    let body = &signed[..signed.len() - 2];
    let kind = kind_from_byte(body[0]).ok_or(PayloadError::BadFormat)?;
    if kind == Kind::String {
        return Ok(KeyRecord {
            meta: Meta::string(body[1..].to_vec(), 0),
            data: Vec::new(),
            score: Vec::new(),
        });
    }
    let mut r = Reader { buf: &body[1..] };
    let len = r.u64()?;
    let head = r.u64()?;
    let data = r.entries()?;
    let score = r.entries()?;
    if kind == Kind::Stream {
        // Entries and group records are all data entries; a stream may be empty.
        if !score.is_empty() {
            return Err(PayloadError::BadFormat);
        }
        let mut meta = Meta::collection(kind, 0, 0);
        meta.len = len;
        meta.value = r.buf.to_vec();
        return Ok(KeyRecord { meta, data, score });
    }
    let want_score = if kind == Kind::ZSet { len } else { 0 };
    // A segmented bitmap's length is its byte length; it stores only its non-zero segments.
    let entries_ok = kind == Kind::Bitmap || data.len() as u64 == len;
    if !r.buf.is_empty() || len == 0 || !entries_ok || score.len() as u64 != want_score {
        return Err(PayloadError::BadFormat);
    }
    let mut meta = Meta::collection(kind, 0, 0);
    meta.len = len;
    if kind == Kind::Hash {
        meta.field_ttls = head == 1;
    } else {
        meta.head = head;
    }
    Ok(KeyRecord { meta, data, score })
}

/* ---- DUMP and RESTORE ---- */

/// DUMP key: the payload, or nil if the key does not exist.
fn dump(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let rec = ctx
        .storage()
        .view()
        .export_key(ctx.db(), &args[1], ctx.now_ms)?;
    let stats = &ctx.server.stats;
    match rec {
        Some(rec) => {
            stats.keyspace_hits.fetch_add(1, Ordering::Relaxed);
            ctx.out.bulk(&encode_payload(&rec));
        }
        None => {
            stats.keyspace_misses.fetch_add(1, Ordering::Relaxed);
            ctx.out.null();
        }
    }
    Ok(())
}

/// RESTORE (and RESTORE-ASKING, which the cluster routing treats as asked) key ttl payload
/// [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency].
///
/// Checks in Redis's order: options, BUSYKEY, TTL, payload. IDLETIME and FREQ are validated and
/// ignored (kvik keeps no access time or frequency). A TTL already in the past restores nothing
/// (and with REPLACE deletes the existing key), replying OK as Redis does.
fn restore(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq) = (false, false);
    let mut j = 4;
    while j < args.len() {
        let more = args.len() - j - 1;
        let opt = &args[j];
        if opt.eq_ignore_ascii_case(b"replace") {
            replace = true;
        } else if opt.eq_ignore_ascii_case(b"absttl") {
            absttl = true;
        } else if opt.eq_ignore_ascii_case(b"idletime") && more >= 1 && !freq {
            let n = kvik_resp::parse_i64(&args[j + 1]).ok_or(CmdError::not_integer())?;
            if n < 0 {
                return Err(CmdError::fixed("Invalid IDLETIME value, must be >= 0"));
            }
            idle = true;
            j += 1;
        } else if opt.eq_ignore_ascii_case(b"freq") && more >= 1 && !idle {
            let n = kvik_resp::parse_i64(&args[j + 1]).ok_or(CmdError::not_integer())?;
            if !(0..=255).contains(&n) {
                return Err(CmdError::fixed(
                    "Invalid FREQ value, must be >= 0 and <= 255",
                ));
            }
            freq = true;
            j += 1;
        } else {
            return Err(CmdError::syntax());
        }
        j += 1;
    }
    let storage = ctx.storage();
    let db = ctx.db();
    let key = &args[1];
    let _guard = storage.lock(db, &[key]);
    let existing = ctx.lookup_write(key)?;
    if !replace && existing.is_some() {
        return Err(CmdError::new(
            ErrorKind::BusyKey,
            "Target key name already exists.",
        ));
    }
    let ttl = kvik_resp::parse_i64(&args[2]).ok_or(CmdError::not_integer())?;
    if ttl < 0 {
        return Err(CmdError::fixed("Invalid TTL value, must be >= 0"));
    }
    let rec = decode_payload(&args[3])?;
    let expire_at = match ttl {
        0 => 0,
        t if absttl => t as u64,
        t => (t as u64).saturating_add(ctx.now_ms),
    };
    let mut batch = Batch::default();
    if expire_at != 0 && expire_at <= ctx.now_ms {
        if existing.is_some() {
            batch.delete_meta(storage, db, key);
            storage.commit(batch)?;
            ctx.notify(Class::Generic, "del", key);
        }
        ctx.out.ok();
        return Ok(());
    }
    let version = if rec.meta.is_collection() {
        storage.next_version()?
    } else {
        0
    };
    batch.import_key(storage, db, key, &rec, version, expire_at);
    storage.commit(batch)?;
    ctx.notify(Class::Generic, "restore", key);
    ctx.out.ok();
    Ok(())
}

/* ---- MIGRATE ---- */

/// MIGRATE's options.
struct MigrateArgs<'a> {
    copy: bool,
    replace: bool,
    username: Option<&'a [u8]>,
    password: Option<&'a [u8]>,
    keys: &'a [Bytes],
    db: i64,
    timeout: Duration,
}

fn parse_migrate(args: &Args) -> Result<MigrateArgs<'_>, CmdError> {
    let mut m = MigrateArgs {
        copy: false,
        replace: false,
        username: None,
        password: None,
        keys: &args[3..4],
        db: 0,
        timeout: Duration::ZERO,
    };
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = &args[j];
        if opt.eq_ignore_ascii_case(b"copy") {
            m.copy = true;
        } else if opt.eq_ignore_ascii_case(b"replace") {
            m.replace = true;
        } else if opt.eq_ignore_ascii_case(b"auth") {
            if more < 1 {
                return Err(CmdError::syntax());
            }
            j += 1;
            m.password = Some(&args[j]);
        } else if opt.eq_ignore_ascii_case(b"auth2") {
            if more < 2 {
                return Err(CmdError::syntax());
            }
            m.username = Some(&args[j + 1]);
            m.password = Some(&args[j + 2]);
            j += 2;
        } else if opt.eq_ignore_ascii_case(b"keys") {
            if !args[3].is_empty() {
                return Err(CmdError::fixed(
                    "When using MIGRATE KEYS option, the key argument must be set to the \
                     empty string",
                ));
            }
            m.keys = &args[j + 1..];
            break;
        } else {
            return Err(CmdError::syntax());
        }
        j += 1;
    }
    let timeout = kvik_resp::parse_i64(&args[5]).ok_or(CmdError::not_integer())?;
    m.db = kvik_resp::parse_i64(&args[4]).ok_or(CmdError::not_integer())?;
    let timeout = if timeout <= 0 { 1000 } else { timeout };
    m.timeout = Duration::from_millis(timeout as u64);
    Ok(m)
}

fn ioerr(what: &str) -> CmdError {
    CmdError::with(
        ErrorKind::IoErr,
        format_args!("error or timeout {what} target instance"),
    )
}

/// One connection to the target, with MIGRATE's timeout on every operation.
struct Target {
    stream: TcpStream,
    buf: Vec<u8>,
    limits: Limits,
}

impl Target {
    fn connect(host: &[u8], port: &[u8], timeout: Duration) -> Result<Target, CmdError> {
        let connect_err = || {
            CmdError::new(
                ErrorKind::IoErr,
                "error or timeout connecting to the client",
            )
        };
        let host = std::str::from_utf8(host).map_err(|_| connect_err())?;
        let port: u16 = std::str::from_utf8(port)
            .ok()
            .and_then(|p| p.parse().ok())
            .ok_or_else(connect_err)?;
        let addr = (host, port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(connect_err)?;
        let stream = match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return Err(connect_err()),
            // Redis connects without blocking and finds out when it writes.
            Err(_) => return Err(ioerr("writing to")),
        };
        let _ = stream.set_nodelay(true);
        stream
            .set_read_timeout(Some(timeout))
            .and_then(|()| stream.set_write_timeout(Some(timeout)))
            .map_err(|_| connect_err())?;
        Ok(Target {
            stream,
            buf: Vec::new(),
            limits: Limits::default(),
        })
    }

    /// Reads the next reply, waiting at most the timeout for each chunk.
    fn read_reply(&mut self) -> Result<Frame, CmdError> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match kvik_resp::parse_frame(&self.buf, &self.limits) {
                Ok(Some((frame, used))) => {
                    self.buf.drain(..used);
                    return Ok(frame);
                }
                Ok(None) => {}
                Err(_) => return Err(ioerr("reading from")),
            }
            match self.stream.read(&mut chunk) {
                Ok(0) | Err(_) => return Err(ioerr("reading from")),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }
}

/// MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password]
/// [AUTH2 username password] [KEYS key ...]
fn migrate(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let m = parse_migrate(args)?;
    let storage = ctx.storage();
    let db = ctx.db();
    // Held until the moved keys are deleted here: a write to one of them waits, then finds it
    // gone (and the cluster routing sends the client to the target).
    let _guard = storage.lock(db, m.keys);
    let view = storage.latest();
    let mut found: Vec<(&Bytes, KeyRecord)> = Vec::with_capacity(m.keys.len());
    // A key named twice is sent twice, as Redis does (the second RESTORE then finds it there).
    for key in m.keys {
        if let Some(rec) = view.export_key(db, key, ctx.now_ms)? {
            found.push((key, rec));
        }
    }
    if found.is_empty() {
        ctx.out.simple("NOKEY");
        return Ok(());
    }

    let mut target = Target::connect(&args[1], &args[2], m.timeout)?;
    let mut req = Vec::new();
    let mut preamble = 0;
    if let Some(pw) = m.password {
        match m.username {
            Some(user) => encode::command(&mut req, &[b"AUTH", user, pw]),
            None => encode::command(&mut req, &[b"AUTH", pw]),
        }
        preamble += 1;
    }
    let db_arg = m.db.to_string();
    encode::command(&mut req, &[b"SELECT", db_arg.as_bytes()]);
    preamble += 1;
    for (key, rec) in &found {
        let ttl = match rec.meta.expire_at_ms {
            0 => 0,
            at => at.saturating_sub(ctx.now_ms).max(1),
        };
        let ttl = ttl.to_string();
        let payload = encode_payload(rec);
        let mut cmd: Vec<&[u8]> = vec![b"RESTORE-ASKING", key, ttl.as_bytes(), &payload];
        if m.replace {
            cmd.push(b"REPLACE");
        }
        encode::command(&mut req, &cmd);
    }
    if target.stream.write_all(&req).is_err() {
        return Err(ioerr("writing to"));
    }

    let mut error: Option<String> = None;
    for _ in 0..preamble {
        if let Frame::Error(e) = target.read_reply()? {
            error.get_or_insert(e);
        }
    }
    let mut batch = Batch::default();
    let mut deleted = Vec::new();
    for (key, _) in &found {
        let reply = target.read_reply()?;
        match reply {
            Frame::Error(e) => {
                error.get_or_insert(e);
            }
            _ if error.is_none() && !m.copy => {
                batch.delete_meta(storage, db, key);
                deleted.push(key);
            }
            _ => {}
        }
    }
    if !batch.is_empty() {
        storage.commit(batch)?;
    }
    for key in deleted {
        ctx.notify(Class::Generic, "del", key);
    }
    match error {
        Some(e) => Err(CmdError::err(format_args!(
            "Target instance replied with error: {e}"
        ))),
        None => {
            ctx.out.ok();
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coll(kind: Kind, n: usize) -> KeyRecord {
        let mut meta = Meta::collection(kind, 7, 99);
        meta.len = n as u64;
        let data: Vec<_> = (0..n)
            .map(|i| (format!("m{i}").into_bytes(), format!("v{i}").into_bytes()))
            .collect();
        let score = if kind == Kind::ZSet {
            data.clone()
        } else {
            Vec::new()
        };
        KeyRecord { meta, data, score }
    }

    #[test]
    fn payloads_round_trip_without_expiry_or_version() {
        let s = KeyRecord {
            meta: Meta::string(b"hello".to_vec(), 12345),
            data: vec![],
            score: vec![],
        };
        let back = decode_payload(&encode_payload(&s)).unwrap();
        assert_eq!(back.meta, Meta::string(b"hello".to_vec(), 0));
        for kind in [Kind::Hash, Kind::List, Kind::Set, Kind::ZSet] {
            let rec = coll(kind, 5);
            let back = decode_payload(&encode_payload(&rec)).unwrap();
            assert_eq!(back.meta.kind, kind);
            assert_eq!((back.meta.version, back.meta.expire_at_ms), (0, 0));
            assert_eq!(back.meta.len, 5);
            assert_eq!(back.meta.head, rec.meta.head);
            assert_eq!(back.data, rec.data);
            assert_eq!(back.score, rec.score);
        }
    }

    #[test]
    fn corrupt_payloads_are_refused() {
        let p = encode_payload(&coll(Kind::Hash, 3));
        for i in 0..p.len() {
            let mut bad = p.clone();
            bad[i] ^= 0x20;
            assert_eq!(decode_payload(&bad).unwrap_err(), PayloadError::Checksum);
        }
        assert_eq!(decode_payload(b"").unwrap_err(), PayloadError::Checksum);
        assert_eq!(
            decode_payload(&p[..p.len() - 1]).unwrap_err(),
            PayloadError::Checksum
        );
        // Checksummed but inconsistent: a length that disagrees with the entries.
        let mut rec = coll(Kind::Set, 3);
        rec.meta.len = 4;
        assert_eq!(
            decode_payload(&encode_payload(&rec)).unwrap_err(),
            PayloadError::BadFormat
        );
        // A huge declared count does not allocate: refused from the remaining size.
        let mut body = vec![Kind::Hash as u8];
        body.extend_from_slice(&1u64.to_be_bytes());
        body.extend_from_slice(&0u64.to_be_bytes());
        body.extend_from_slice(&u32::MAX.to_be_bytes());
        body.extend_from_slice(&DUMP_VERSION.to_le_bytes());
        let crc = crc32fast::hash(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(decode_payload(&body).unwrap_err(), PayloadError::BadFormat);
    }

    #[test]
    fn migrate_keys_follow_redis() {
        let a =
            |v: &[&str]| -> Vec<Bytes> { v.iter().map(|s| Bytes::from(s.to_string())).collect() };
        assert_eq!(
            migrate_keys(&a(&["migrate", "h", "1", "k", "0", "5"])),
            vec![3]
        );
        assert_eq!(
            migrate_keys(&a(&[
                "migrate", "h", "1", "", "0", "5", "REPLACE", "keys", "a", "b"
            ])),
            vec![8, 9]
        );
        assert!(migrate_keys(&a(&["migrate", "h", "1", "", "0", "5"])).is_empty());
    }
}
