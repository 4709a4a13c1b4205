//! Stream arguments and reply pieces shared by every stream command: IDs (parsed by
//! `kvik_types::stream_id`, errors turned into command errors), counts, the millisecond BLOCK
//! timeout, and how an ID and an entry are written in a reply.

use crate::cmd::ctx::{CmdError, Reply};
use crate::storage::stream::decode_fields;
use kvik_resp::parse_i64;
use kvik_types::stream_id::{self, StreamId, StreamIdError};

/// A stream ID error as a command error (Redis's text, which already starts with "ERR").
pub fn id_err(e: StreamIdError) -> CmdError {
    let text = e.to_string();
    CmdError::err(text.strip_prefix("ERR ").unwrap_or(&text))
}

/// An ID where `-` and `+` are refused; `ms` alone is `ms-0`.
pub fn strict_id(arg: &[u8]) -> Result<StreamId, CmdError> {
    stream_id::parse_strict_id(arg, 0).map_err(id_err)
}

/// An ID where `-` and `+` are allowed; `ms` alone is `ms-0`.
pub fn any_id(arg: &[u8]) -> Result<StreamId, CmdError> {
    stream_id::parse_id(arg, 0).map_err(id_err)
}

/// The first ID of an interval (`(` excludes).
pub fn range_start(arg: &[u8]) -> Result<StreamId, CmdError> {
    stream_id::parse_range_start(arg).map_err(id_err)
}

/// The last ID of an interval (`(` excludes; `ms` alone is `ms-MAX`).
pub fn range_end(arg: &[u8]) -> Result<StreamId, CmdError> {
    stream_id::parse_range_end(arg).map_err(id_err)
}

/// An integer argument (Redis's `getLongLongFromObjectOrReply`).
pub fn int(arg: &[u8]) -> Result<i64, CmdError> {
    parse_i64(arg).ok_or(CmdError::not_integer())
}

/// An integer argument with a command-specific error text.
pub fn int_or(arg: &[u8], err: &'static str) -> Result<i64, CmdError> {
    parse_i64(arg).ok_or(CmdError::fixed(err))
}

/// A COUNT where a negative value means 0 (0 = no limit for the readers).
pub fn count(arg: &[u8]) -> Result<u64, CmdError> {
    Ok(int(arg)?.max(0) as u64)
}

/// XREAD's BLOCK milliseconds as a deadline in Unix ms (0 = forever), with Redis's errors.
pub fn block_ms(arg: &[u8], now_ms: u64) -> Result<u64, CmdError> {
    let ms = int_or(arg, "timeout is not an integer or out of range")?;
    if ms < 0 {
        return Err(CmdError::fixed("timeout is negative"));
    }
    if ms == 0 {
        return Ok(0);
    }
    if ms as u64 > i64::MAX as u64 - now_ms {
        return Err(CmdError::fixed("timeout is out of range"));
    }
    Ok(now_ms + ms as u64)
}

/// True if `arg` is the option `name` (ASCII case-insensitive).
pub fn is(arg: &[u8], name: &str) -> bool {
    arg.eq_ignore_ascii_case(name.as_bytes())
}

/// An ID as a bulk string.
pub fn write_id(out: &mut Reply, id: StreamId) {
    out.bulk(id.to_string().as_bytes());
}

/// An entry: `[id, [field, value, ...]]`.
pub fn write_entry(out: &mut Reply, id: StreamId, raw_fields: &[u8]) {
    let fields = decode_fields(raw_fields);
    out.array(2);
    write_id(out, id);
    out.array(fields.len());
    for f in fields {
        out.bulk(f);
    }
}

/// "unknown subcommand or wrong number of arguments for '<sub>'. Try <CMD> HELP." (Redis's
/// `addReplySubcommandSyntaxError`).
pub fn subcommand_syntax(cmd: &str, sub: &[u8]) -> CmdError {
    CmdError::err(format_args!(
        "unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        String::from_utf8_lossy(&sub[..sub.len().min(128)]),
        cmd
    ))
}
