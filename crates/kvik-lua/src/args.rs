//! Argument checking for the libraries written in Rust, with the messages Lua's C API
//! (`luaL_checknumber`, `luaL_checklstring`...) gives, and [`Raise`]: how a Rust library
//! function raises a Lua error.
//!
//! A Rust callback cannot raise an arbitrary Lua value through mlua, so each library function
//! returns `(true, results...)` or `(false, error)` and a Lua wrapper in `sandbox.lua`
//! raises the error with `error(e, 0)`: no position is added, as for errors from C.

use mlua::{Lua, MultiValue, Value};

use crate::numfmt::{lua_number_text, lua_str2number};

/// A Lua error to raise: a message (what `luaL_error` in a C library raises) or a value
/// (Redis's error tables).
#[derive(Debug)]
pub enum Raise {
    /// A plain message.
    Msg(String),
    /// Any Lua value, typically a table `{err = ...}`.
    Value(Value),
    /// A failure of the Lua state itself (out of memory...).
    Lua(mlua::Error),
}

impl From<String> for Raise {
    fn from(s: String) -> Raise {
        Raise::Msg(s)
    }
}

impl From<&str> for Raise {
    fn from(s: &str) -> Raise {
        Raise::Msg(s.to_string())
    }
}

impl From<mlua::Error> for Raise {
    fn from(e: mlua::Error) -> Raise {
        Raise::Lua(e)
    }
}

/// The result of a library function written in Rust.
pub type LibResult = Result<MultiValue, Raise>;

/// The value a library function raised, kept until the error handler or `pcall` asks for it
/// (mlua wraps every error a Rust callback returns; the wrapper carries only the id).
pub(crate) struct PendingRaise {
    id: u64,
    value: Option<Value>,
}

/// The marker error a Rust callback returns to raise a [`PendingRaise`].
#[derive(Debug)]
struct RaiseMarker(u64);

impl std::fmt::Display for RaiseMarker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "script error #{}", self.0)
    }
}

impl std::error::Error for RaiseMarker {}

/// Raises `value` as the Lua error of the running Rust callback.
pub(crate) fn raise_value(lua: &Lua, value: Value) -> mlua::Error {
    let id = match lua.app_data_mut::<PendingRaise>() {
        Some(mut p) => {
            p.id += 1;
            p.value = Some(value);
            p.id
        }
        None => {
            lua.set_app_data(PendingRaise {
                id: 1,
                value: Some(value),
            });
            1
        }
    };
    mlua::Error::external(RaiseMarker(id))
}

fn marker_id(e: &mlua::Error) -> Option<u64> {
    match e {
        mlua::Error::CallbackError { cause, .. } => marker_id(cause),
        mlua::Error::ExternalError(ext) => ext.downcast_ref::<RaiseMarker>().map(|m| m.0),
        mlua::Error::WithContext { cause, .. } => marker_id(cause),
        _ => None,
    }
}

/// The value behind a raised marker error (what `sandbox.lua`'s handler and `pcall` see),
/// or `err` itself when it is not one.
pub(crate) fn take_raised(lua: &Lua, err: Value) -> Value {
    let Value::Error(e) = &err else {
        return err;
    };
    let Some(id) = marker_id(e) else {
        return err;
    };
    match lua.app_data_mut::<PendingRaise>() {
        Some(mut p) if p.id == id => p.value.take().unwrap_or(Value::Nil),
        _ => err,
    }
}

/// `luaL_where(L, 1)`: `chunk:line: ` of the function calling the running C function, or
/// nothing when that is not Lua code.
fn where_prefix(lua: &Lua) -> String {
    match lua.inspect_stack(1) {
        Some(d) if d.curr_line() > 0 => {
            let src = d.source();
            format!(
                "{}:{}: ",
                src.short_src.as_deref().unwrap_or("?"),
                d.curr_line()
            )
        }
        _ => String::new(),
    }
}

/// Turns a [`LibResult`] into what a Lua function returns or raises: messages get the
/// caller's position as C libraries' `luaL_error` adds it.
pub fn finish(lua: &Lua, r: LibResult) -> mlua::Result<MultiValue> {
    match r {
        Ok(vals) => Ok(vals),
        Err(Raise::Msg(m)) => {
            let text = format!("{}{m}", where_prefix(lua));
            Err(raise_value(lua, Value::String(lua.create_string(text)?)))
        }
        Err(Raise::Value(v)) => Err(raise_value(lua, v)),
        Err(Raise::Lua(e)) => Err(e),
    }
}

/// Creates a library function from a Rust function over its arguments.
pub fn lib_fn<F>(lua: &Lua, f: F) -> mlua::Result<mlua::Function>
where
    F: Fn(&Lua, &[Value]) -> LibResult + mlua::MaybeSend + 'static,
{
    lua.create_function(move |lua, args: MultiValue| {
        let args: Vec<Value> = args.into_vec();
        finish(lua, f(lua, &args))
    })
}

/// Lua's type name of a value (`luaL_typename`).
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::LightUserData(_) | Value::UserData(_) => "userdata",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

/// `bad argument #n to 'fname' (msg)`.
pub fn arg_error(n: usize, fname: &str, msg: &str) -> Raise {
    Raise::Msg(format!("bad argument #{n} to '{fname}' ({msg})"))
}

fn type_error(args: &[Value], i: usize, fname: &str, expected: &str) -> Raise {
    let got = args.get(i).map_or("no value", type_name);
    arg_error(i + 1, fname, &format!("{expected} expected, got {got}"))
}

/// A number, or a string Lua would coerce (`lua_tonumber`).
pub fn to_number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        Value::String(s) => lua_str2number(&s.as_bytes()),
        _ => None,
    }
}

/// `luaL_checknumber(L, i + 1)`.
pub fn check_number(args: &[Value], i: usize, fname: &str) -> Result<f64, Raise> {
    args.get(i)
        .and_then(to_number)
        .ok_or_else(|| type_error(args, i, fname, "number"))
}

/// `luaL_optnumber(L, i + 1, default)`.
pub fn opt_number(args: &[Value], i: usize, fname: &str, default: f64) -> Result<f64, Raise> {
    match args.get(i) {
        None | Some(Value::Nil) => Ok(default),
        Some(_) => check_number(args, i, fname),
    }
}

/// A string, or a number Lua would coerce (`lua_tolstring`).
pub fn to_bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Integer(i) => Some(lua_number_text(*i as f64).into_bytes()),
        Value::Number(n) => Some(lua_number_text(*n).into_bytes()),
        _ => None,
    }
}

/// `luaL_checklstring(L, i + 1)`.
pub fn check_bytes(args: &[Value], i: usize, fname: &str) -> Result<Vec<u8>, Raise> {
    args.get(i)
        .and_then(to_bytes)
        .ok_or_else(|| type_error(args, i, fname, "string"))
}
