//! Bitmap commands: SETBIT GETBIT BITCOUNT BITPOS BITOP BITFIELD BITFIELD_RO (Redis's `bitmap`
//! group).
//!
//! A bitmap is a Redis string: the bit algorithms (`kvik_types::bits`) run over its bytes, so
//! GET, APPEND, SETRANGE, DUMP and the rest see exactly what Redis would. A short one is an
//! inline string; one that a bit write grows past `BITMAP_INLINE_MAX` is stored in segments
//! ([`segments`]; layout in `storage/encoding.rs`), so SETBIT far out writes one segment.
//! Writes go through [`segments::write_bits`] (the key's lock, the expiry kept, WRONGTYPE for
//! other kinds, only changed segments written); reads that need only the value (GETBIT,
//! BITCOUNT, BITPOS, BITFIELD_RO) are written once over [`KeyReads`], so the hot cache answers
//! them on the I/O thread when it holds the (inline) key, and load only the segments they read.
//!
//! Argument order follows Redis 7.0 where it decides the error: SETBIT and GETBIT parse the
//! offset before the key is looked up; BITCOUNT looks the key up first (a missing key is 0
//! whatever the range); BITPOS parses its bit, looks the key up, then parses the range;
//! BITFIELD parses every operation before touching the key.

use super::cached::KeyReads;
use super::ctx::{Args, CmdError, CmdResult, Ctx};
use super::spec::{CacheEffect, Class, CommandSpec, Flags, Handler, KeySpec};
use crate::storage::Batch;
use kvik_types::bits::{self, count, field, op, BitRead};
use segments::{write_bits, BIT_WRITE};
use std::ops::Range;

pub mod segments;

const READ: Flags = Flags::READONLY;
const READ_FAST: Flags = Flags::READONLY.union(Flags::FAST);
const WRITE_OOM: Flags = Flags::WRITE.union(Flags::DENYOOM);

const ACL_READ_FAST: &[&str] = &["read", "bitmap", "fast"];
const ACL_READ_SLOW: &[&str] = &["read", "bitmap", "slow"];
const ACL_WRITE_SLOW: &[&str] = &["write", "bitmap", "slow"];

/// BITOP's keys: the destination and every source.
const FROM_SECOND: KeySpec = KeySpec {
    first: 2,
    last: -1,
    step: 1,
};

/// Declares one bitmap command (group "bitmap"); a write rewrites the string value, so a cached
/// copy is updated.
const fn b(
    name: &'static str,
    arity: i32,
    flags: Flags,
    keys: KeySpec,
    handler: Handler,
    acl: &'static [&'static str],
) -> CommandSpec {
    let spec = CommandSpec::new(name, arity, flags, keys, handler)
        .acl(acl)
        .group("bitmap");
    if flags.contains(Flags::WRITE) {
        spec.cache(CacheEffect::Update)
    } else {
        spec
    }
}

pub static COMMANDS: &[CommandSpec] = &[
    b("setbit", 4, WRITE_OOM, KeySpec::ONE, setbit, ACL_WRITE_SLOW)
        .rtc_write()
        .event(Class::String, "setbit")
        .doc(
        "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist.",
        "2.2.0",
        "O(1)",
    ),
    b("getbit", 3, READ_FAST, KeySpec::ONE, |c, a| getbit(c, a), ACL_READ_FAST)
        .rtc(|c, a| getbit(c, a))
        .rtc_nowait_read()
        .doc("Returns a bit value by offset.", "2.2.0", "O(1)"),
    b("bitcount", -2, READ, KeySpec::ONE, |c, a| bitcount(c, a), ACL_READ_SLOW)
        .rtc(|c, a| bitcount(c, a))
        .rtc_nowait_read()
        .doc("Counts the number of set bits (population counting) in a string.", "2.6.0", "O(N)"),
    b("bitpos", -3, READ, KeySpec::ONE, |c, a| bitpos(c, a), ACL_READ_SLOW)
        .rtc(|c, a| bitpos(c, a))
        .rtc_nowait_read()
        .doc("Finds the first set (1) or clear (0) bit in a string.", "2.8.7", "O(N)"),
    b("bitop", -4, WRITE_OOM, FROM_SECOND, bitop, ACL_WRITE_SLOW)
        .event(Class::String, "set")
        .event(Class::Generic, "del")
        .doc(
        "Performs bitwise operations on multiple strings, and stores the result.",
        "2.6.0",
        "O(N)",
    ),
    b("bitfield", -2, WRITE_OOM, KeySpec::ONE, bitfield, ACL_WRITE_SLOW)
        .rtc_write()
        .event(Class::String, "setbit")
        .doc(
        "Performs arbitrary bitfield integer operations on strings.",
        "3.2.0",
        "O(1) for each subcommand specified",
    ),
    b("bitfield_ro", -2, READ_FAST, KeySpec::ONE, |c, a| bitfield_ro(c, a), ACL_READ_FAST)
        .rtc(|c, a| bitfield_ro(c, a))
        .rtc_nowait_read()
        .doc(
            "Performs arbitrary read-only bitfield integer operations on strings.",
            "6.0.0",
            "O(1) for each subcommand specified",
        ),
];

/// The arguments after the key, as byte slices (what the algorithm parsers take).
fn rest(args: &Args, from: usize) -> Vec<&[u8]> {
    args[from..].iter().map(|a| &a[..]).collect()
}

/// SETBIT key offset 0|1: the bit's previous value.
fn setbit(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let max = ctx
        .server
        .config
        .proto_max_bulk_len
        .load(std::sync::atomic::Ordering::Relaxed);
    let offset = bits::parse_offset(&args[2], None, max)?;
    let on = bits::parse_bit_value(&args[3])?;
    let _guard = ctx.lock_keys(&[&args[1]])?;
    let byte = offset >> 3;
    let span = byte..byte + 1;
    let spans = |_| Ok([span]);
    let (old, wrote) = write_bits(ctx, &args[1], BIT_WRITE, spans, |v, _| {
        bits::setbit(v, offset, on)
    })?;
    if wrote {
        ctx.notify(Class::String, "setbit", &args[1]);
    }
    ctx.out.int(i64::from(old));
    Ok(())
}

/// GETBIT key offset: 0 past the end or for a missing key.
fn getbit<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    let offset = bits::parse_offset(&args[2], None, ctx.max_bulk_len()).map_err(CmdError::from)?;
    let byte = offset >> 3;
    let span = byte..byte + 1;
    let bit = match ctx.read_bits(&args[1], Some(std::slice::from_ref(&span)))? {
        Some(v) => bits::getbit(&v, offset),
        None => 0,
    };
    ctx.out().int(i64::from(bit));
    Ok(())
}

/// BITCOUNT key [start end [BYTE|BIT]]
fn bitcount<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    let Some(value) = ctx.read_bits(&args[1], None)? else {
        ctx.out().int(0);
        return Ok(());
    };
    let range = count::parse_bitcount_args(&rest(args, 2)).map_err(CmdError::from)?;
    let n = count::bitcount(&value, range);
    value.check()?;
    ctx.out().int(n as i64);
    Ok(())
}

/// BITPOS key bit [start [end [BYTE|BIT]]]
fn bitpos<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    let bit = count::parse_bitpos_bit(&args[2]).map_err(CmdError::from)?;
    let Some(value) = ctx.read_bits(&args[1], None)? else {
        ctx.out().int(count::bitpos_missing(bit));
        return Ok(());
    };
    let range = count::parse_bitpos_args(&rest(args, 3)).map_err(CmdError::from)?;
    let pos = count::bitpos(&value, bit, range);
    value.check()?;
    ctx.out().int(pos);
    Ok(())
}

/// BITOP AND|OR|XOR|NOT destkey srckey [srckey ...]: the result's length. The destination is
/// replaced whatever it held (no expiry), or deleted when the result is empty.
fn bitop(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let operation = op::parse_bitop(&args[1], args.len() - 3)?;
    let dest = &args[2];
    let keys: Vec<&[u8]> = args[2..].iter().map(|k| &k[..]).collect();
    let storage = ctx.storage();
    let _guard = storage.lock(ctx.db(), &keys);
    let mut values = Vec::with_capacity(keys.len() - 1);
    for key in &keys[1..] {
        values.push(ctx.read_bits(key, None)?);
    }
    let empty = segments::BitValue::Inline(bytes::Bytes::new());
    let sources: Vec<&dyn BitRead> = values
        .iter()
        .map(|v| v.as_ref().unwrap_or(&empty) as &dyn BitRead)
        .collect();
    let len = sources.iter().map(|s| s.byte_len()).max().unwrap_or(0);
    if len == 0 {
        if ctx.lookup_write(dest)?.is_some() {
            let mut batch = Batch::default();
            batch.delete_meta(storage, ctx.db(), dest);
            storage.commit(batch)?;
            ctx.notify(Class::Generic, "del", dest);
        }
    } else {
        segments::store_new(ctx, dest, len, |sink| {
            op::bitop(operation, &sources, sink);
        })?;
        for v in values.iter().flatten() {
            v.check()?;
        }
        ctx.notify(Class::String, "set", dest);
    }
    ctx.out.int(len as i64);
    Ok(())
}

/// The byte ranges BITFIELD's operations read or write.
fn field_spans(ops: &[field::FieldOp]) -> Vec<Range<u64>> {
    ops.iter()
        .map(|op| (op.offset >> 3)..((op.offset + u64::from(op.ty.bits) - 1) >> 3) + 1)
        .collect()
}

/// Writes BITFIELD's replies: an integer per operation, nil for one OVERFLOW FAIL refused.
fn reply_fields(out: &mut crate::reply::Reply, replies: &[Option<i64>]) {
    out.array(replies.len());
    for r in replies {
        match r {
            Some(n) => out.int(*n),
            None => out.null(),
        }
    }
}

/// BITFIELD key [GET type offset] [SET type offset value] [INCRBY type offset increment]
/// [OVERFLOW WRAP|SAT|FAIL]. Only GETs: a read (the key is not created). Otherwise the value is
/// grown to the furthest write and stored when it was created, grown or changed.
fn bitfield(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let max = ctx.max_bulk_len();
    let ops = field::parse(&rest(args, 2), false, max)?;
    if field::is_read_only(&ops) {
        return bitfield_read(ctx, args, &ops);
    }
    let _guard = ctx.lock_keys(&[&args[1]])?;
    let spans = |_| Ok(field_spans(&ops));
    let (applied, _) = write_bits(ctx, &args[1], BIT_WRITE, spans, |v, created| {
        field::apply(v, created, &ops)
    })?;
    if applied.changes > 0 {
        ctx.notify(Class::String, "setbit", &args[1]);
    }
    reply_fields(ctx.out, &applied.replies);
    Ok(())
}

/// BITFIELD_RO key [GET type offset ...]
fn bitfield_ro<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    let ops = field::parse(&rest(args, 2), true, ctx.max_bulk_len()).map_err(CmdError::from)?;
    bitfield_read(ctx, args, &ops)
}

/// The read-only BITFIELD: every GET against the value (empty for a missing key).
fn bitfield_read<'a, C: KeyReads<'a>>(
    ctx: &mut C,
    args: &Args,
    ops: &[field::FieldOp],
) -> Result<(), C::Error> {
    let replies = match ctx.read_bits(&args[1], Some(&field_spans(ops)))? {
        Some(value) => field::read(&value, ops),
        None => field::read(&[][..], ops),
    };
    reply_fields(ctx.out(), &replies);
    Ok(())
}
