//! The `redis` table scripts see, minus `call`/`pcall` (which go through the [`Host`] and
//! are bound per run in [`crate::runtime`]): replies (`error_reply`, `status_reply`),
//! `sha1hex`, `log`, `setresp`, `set_repl`, `replicate_commands`, the debugger no-ops, and
//! Redis's constants. Argument errors are Redis 7.0's texts, raised as `{err=...}` tables.

use mlua::{Lua, MultiValue, Table, Value};

use crate::args::{lib_fn, to_bytes, to_number, LibResult, Raise};
use crate::convert::error_table;
use crate::host::LogLevel;
use crate::runtime::RunState;
use crate::script::sha1_hex;

/// The Redis version scripts see (`redis.REDIS_VERSION`).
pub const REDIS_VERSION: &str = "7.0.15";
/// `redis.REDIS_VERSION_NUM`: `0x00MMmmpp`.
pub const REDIS_VERSION_NUM: i64 = 0x07_00_0f;

const REPL_NONE: i64 = 0;
const REPL_AOF: i64 = 1;
const REPL_REPLICA: i64 = 2;
const REPL_ALL: i64 = REPL_AOF | REPL_REPLICA;

/// Raises Redis's `{err = "ERR <msg>"}` table.
pub(crate) fn raise(lua: &Lua, msg: &str) -> Raise {
    match error_table(lua, msg.as_bytes()) {
        Ok(t) => Raise::Value(Value::Table(t)),
        Err(e) => Raise::Lua(e),
    }
}

fn one(v: impl mlua::IntoLua, lua: &Lua) -> LibResult {
    Ok(MultiValue::from_vec(vec![v.into_lua(lua)?]))
}

fn none() -> LibResult {
    Ok(MultiValue::new())
}

fn error_reply(lua: &Lua, args: &[Value]) -> LibResult {
    let (1, Some(Value::String(s))) = (args.len(), args.first()) else {
        return one(error_table(lua, b"wrong number or type of arguments")?, lua);
    };
    let s = s.as_bytes();
    let t = if s.starts_with(b"-") {
        error_table(lua, &s)?
    } else {
        let mut dashed = b"-".to_vec();
        dashed.extend_from_slice(&s);
        error_table(lua, &dashed)?
    };
    one(t, lua)
}

fn status_reply(lua: &Lua, args: &[Value]) -> LibResult {
    let (1, Some(Value::String(s))) = (args.len(), args.first()) else {
        return one(error_table(lua, b"wrong number or type of arguments")?, lua);
    };
    let t = lua.create_table_with_capacity(0, 1)?;
    t.raw_set("ok", s.clone())?;
    one(t, lua)
}

fn sha1hex(lua: &Lua, args: &[Value]) -> LibResult {
    if args.len() != 1 {
        return Err(raise(lua, "wrong number of arguments"));
    }
    let body = to_bytes(&args[0]).unwrap_or_default();
    one(lua.create_string(sha1_hex(&body))?, lua)
}

/// `redis.log(level, ...)`'s checks: the level and the message (arguments joined by spaces).
pub(crate) fn parse_log(lua: &Lua, args: &[Value]) -> Result<(LogLevel, Vec<u8>), Raise> {
    if args.len() < 2 {
        return Err(raise(lua, "redis.log() requires two arguments or more."));
    }
    let Some(level) = (match &args[0] {
        Value::Number(_) | Value::Integer(_) => to_number(&args[0]),
        _ => None,
    }) else {
        return Err(raise(lua, "First argument must be a number (log level)."));
    };
    let Some(level) = LogLevel::from_number(level as i64) else {
        return Err(raise(lua, "Invalid debug level."));
    };
    let mut msg = Vec::new();
    for (i, a) in args[1..].iter().enumerate() {
        if i > 0 {
            msg.push(b' ');
        }
        if let Some(b) = to_bytes(a) {
            msg.extend_from_slice(&b);
        }
    }
    Ok((level, msg))
}

fn setresp(lua: &Lua, args: &[Value]) -> LibResult {
    if args.len() != 1 {
        return Err(raise(lua, "redis.setresp() requires one argument."));
    }
    let v = to_number(&args[0]).unwrap_or(0.0) as i64;
    if v != 2 && v != 3 {
        return Err(raise(lua, "RESP version must be 2 or 3."));
    }
    if let Some(st) = lua.app_data_ref::<RunState>() {
        st.resp.set(v as u8);
    }
    none()
}

fn set_repl(lua: &Lua, args: &[Value]) -> LibResult {
    if args.len() != 1 {
        return Err(raise(lua, "redis.set_repl() requires two arguments."));
    }
    let flags = to_number(&args[0]).unwrap_or(0.0) as i64;
    if flags & !REPL_ALL != 0 {
        return Err(raise(
            lua,
            "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
        ));
    }
    none()
}

/// A command's arguments as `redis.call` and `redis.acl_check_cmd` take them: strings, and
/// numbers written as `%.17g`. `Err` is the message Redis raises (without `ERR `).
pub(crate) fn command_args(args: &[Value]) -> Result<Vec<Vec<u8>>, &'static str> {
    if args.is_empty() {
        return Err("Please specify at least one argument for this redis lib call");
    }
    args.iter()
        .map(|a| match a {
            Value::String(s) => Ok(s.as_bytes().to_vec()),
            Value::Integer(i) => Ok(kvik_resp::format_g17(*i as f64).into_bytes()),
            Value::Number(n) => Ok(kvik_resp::format_g17(*n).into_bytes()),
            _ => Err("Lua redis lib command arguments must be strings or integers"),
        })
        .collect()
}

/// Builds the raw `redis` table (functions follow the `(ok, ...)` convention; the sandbox
/// wraps them and adds `call` / `pcall`).
pub(crate) fn create(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("error_reply", lib_fn(lua, error_reply)?)?;
    t.set("status_reply", lib_fn(lua, status_reply)?)?;
    t.set("sha1hex", lib_fn(lua, sha1hex)?)?;
    t.set("setresp", lib_fn(lua, setresp)?)?;
    t.set("set_repl", lib_fn(lua, set_repl)?)?;
    t.set("replicate_commands", lib_fn(lua, |lua, _| one(true, lua))?)?;
    t.set("breakpoint", lib_fn(lua, |lua, _| one(false, lua))?)?;
    t.set("debug", lib_fn(lua, |_, _| none())?)?;
    t.set("REDIS_VERSION", REDIS_VERSION)?;
    t.set("REDIS_VERSION_NUM", REDIS_VERSION_NUM)?;
    for (name, level) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
        ("REPL_NONE", REPL_NONE),
        ("REPL_AOF", REPL_AOF),
        ("REPL_SLAVE", REPL_REPLICA),
        ("REPL_REPLICA", REPL_REPLICA),
        ("REPL_ALL", REPL_ALL),
    ] {
        t.set(name, level)?;
    }
    Ok(t)
}
