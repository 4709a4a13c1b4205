//! Argument checking for the libraries written in Rust, with the messages Lua's C API
//! (`luaL_checknumber`, `luaL_checklstring`...) gives, and [`Raise`]: how a Rust library
//! function raises a Lua error.
//!
//! A Rust callback cannot raise an arbitrary Lua value through mlua, so each library function
//! returns `(true, results...)` or `(false, error)` and a Lua wrapper in `sandbox.lua`
//! raises the error with `error(e, 0)`: no position is added, as for errors from C.

use mlua::{IntoLuaMulti, Lua, MultiValue, Value};

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

/// Turns a [`LibResult`] into the `(ok, ...)` convention the Lua wrapper expects.
pub fn to_protocol(lua: &Lua, r: LibResult) -> mlua::Result<MultiValue> {
    match r {
        Ok(mut vals) => {
            vals.push_front(Value::Boolean(true));
            Ok(vals)
        }
        Err(Raise::Msg(m)) => (false, lua.create_string(m)?).into_lua_multi(lua),
        Err(Raise::Value(v)) => (false, v).into_lua_multi(lua),
        Err(Raise::Lua(e)) => Err(e),
    }
}

/// Creates a library function following the `(ok, ...)` convention.
pub fn lib_fn<F>(lua: &Lua, f: F) -> mlua::Result<mlua::Function>
where
    F: Fn(&Lua, &[Value]) -> LibResult + mlua::MaybeSend + 'static,
{
    lua.create_function(move |lua, args: MultiValue| {
        let args: Vec<Value> = args.into_vec();
        to_protocol(lua, f(lua, &args))
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
        Value::Integer(i) => Some(i.to_string().into_bytes()),
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
