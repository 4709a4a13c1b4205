//! Redis 7.0's type conversions between RESP replies and Lua values, both ways.
//!
//! Command reply -> Lua (`redis.call`'s result): integer -> number, bulk -> string, null bulk
//! and null array -> false, array -> table, status -> `{ok=s}`, error -> `{err=s}`; with
//! `redis.setresp(3)` also map -> `{map={k=v}}`, set -> `{set={m=true}}`, null -> nil,
//! double -> `{double=n}`, boolean -> boolean, big number -> `{big_number=s}`, verbatim ->
//! `{verbatim_string={format=f, string=s}}`.
//!
//! Lua -> reply (the script's result): number -> integer (truncated), string -> bulk, table ->
//! array up to the first nil, unless it has `err`, `ok`, `double`, `big_number`, `map`, `set`
//! or `verbatim_string`; true -> 1 and false -> null (RESP3 booleans after `setresp(3)`);
//! anything else -> null.

use kvik_resp::{encode, Frame, Proto};
use mlua::{Lua, Table, Value};

use crate::numfmt::c_double_to_i64;

/// Nesting beyond which a reply is cut with Redis's stack-limit error.
const MAX_REPLY_DEPTH: usize = 1000;

/// Redis's `luaPushErrorBuff`: `-CODE msg` keeps its code, anything else gets `ERR`; the
/// result is the `{err = "CODE msg"}` table scripts see.
pub fn error_table(lua: &Lua, text: &[u8]) -> mlua::Result<Table> {
    let (code, msg): (&[u8], &[u8]) = match text.strip_prefix(b"-") {
        Some(rest) => match rest.iter().position(|&c| c == b' ') {
            Some(sp) => (&rest[..sp], &rest[sp + 1..]),
            None => (b"ERR", rest),
        },
        None => (b"ERR", text),
    };
    let msg = trim_crlf(msg);
    let mut full = Vec::with_capacity(code.len() + 1 + msg.len());
    full.extend_from_slice(code);
    full.push(b' ');
    full.extend_from_slice(msg);
    let t = lua.create_table_with_capacity(0, 2)?;
    t.raw_set("err", lua.create_string(&full)?)?;
    Ok(t)
}

fn trim_crlf(mut s: &[u8]) -> &[u8] {
    while let [b'\r' | b'\n', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b'\r' | b'\n'] = s {
        s = rest;
    }
    s
}

/// The error table `redis.pcall` returns for a command's error reply (Redis marks it so the
/// error is not counted twice in the error stats).
pub fn reply_error_table(lua: &Lua, text: &[u8]) -> mlua::Result<Table> {
    let mut dashed = Vec::with_capacity(text.len() + 1);
    dashed.push(b'-');
    dashed.extend_from_slice(text);
    let t = error_table(lua, &dashed)?;
    t.raw_set("ignore_error_stats_update", true)?;
    Ok(t)
}

fn single(lua: &Lua, key: &str, v: impl mlua::IntoLua) -> mlua::Result<Value> {
    let t = lua.create_table_with_capacity(0, 1)?;
    t.raw_set(key, v)?;
    Ok(Value::Table(t))
}

/// A command reply as `redis.call` returns it to a script whose protocol is `resp`.
pub fn frame_to_lua(lua: &Lua, f: &Frame, resp: u8) -> mlua::Result<Value> {
    Ok(match f {
        Frame::Integer(n) => Value::Number(*n as f64),
        Frame::Bulk(b) => Value::String(lua.create_string(b)?),
        Frame::Simple(s) => single(lua, "ok", lua.create_string(s)?)?,
        Frame::Error(e) => Value::Table(reply_error_table(lua, e.as_bytes())?),
        Frame::BlobError(e) => Value::Table(reply_error_table(lua, e)?),
        Frame::Null if resp == 2 => Value::Boolean(false),
        Frame::Null => Value::Nil,
        Frame::Array(items) | Frame::Push(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, frame_to_lua(lua, item, resp)?)?;
            }
            Value::Table(t)
        }
        Frame::Map(pairs) => {
            let m = lua.create_table_with_capacity(0, pairs.len())?;
            for (k, v) in pairs {
                let k = frame_to_lua(lua, k, resp)?;
                if !k.is_nil() {
                    m.raw_set(k, frame_to_lua(lua, v, resp)?)?;
                }
            }
            single(lua, "map", m)?
        }
        Frame::Set(items) => {
            let s = lua.create_table_with_capacity(0, items.len())?;
            for item in items {
                let k = frame_to_lua(lua, item, resp)?;
                if !k.is_nil() {
                    s.raw_set(k, true)?;
                }
            }
            single(lua, "set", s)?
        }
        Frame::Double(d) => single(lua, "double", *d)?,
        Frame::Boolean(b) => Value::Boolean(*b),
        Frame::BigNumber(s) => single(lua, "big_number", lua.create_string(s)?)?,
        Frame::Verbatim { format, text } => {
            let v = lua.create_table_with_capacity(0, 2)?;
            v.raw_set("format", lua.create_string(format)?)?;
            v.raw_set("string", lua.create_string(text)?)?;
            single(lua, "verbatim_string", v)?
        }
    })
}

/// Writes a script's result as the calling client's protocol spells it. `script_resp` is the
/// script's `redis.setresp` (it decides how booleans convert).
pub fn write_reply(out: &mut Vec<u8>, v: &Value, script_resp: u8, proto: Proto) {
    write_value(out, v, script_resp, proto, 0);
}

fn write_value(out: &mut Vec<u8>, v: &Value, script_resp: u8, proto: Proto, depth: usize) {
    match v {
        Value::Boolean(b) => {
            if script_resp == 2 {
                if *b {
                    encode::integer(out, 1);
                } else {
                    encode::null(out, proto);
                }
            } else {
                encode::boolean(out, *b, proto);
            }
        }
        Value::Integer(n) => encode::integer(out, *n),
        Value::Number(n) => encode::integer(out, c_double_to_i64(*n)),
        Value::String(s) => encode::bulk(out, &s.as_bytes()),
        Value::Table(t) => {
            if depth >= MAX_REPLY_DEPTH {
                encode::error(out, b"ERR reached lua stack limit");
                return;
            }
            write_table(out, t, script_resp, proto, depth + 1);
        }
        _ => encode::null(out, proto),
    }
}

fn string_field(t: &Table, key: &str) -> Option<mlua::String> {
    match t.raw_get::<Value>(key) {
        Ok(Value::String(s)) => Some(s),
        _ => None,
    }
}

fn table_field(t: &Table, key: &str) -> Option<Table> {
    match t.raw_get::<Value>(key) {
        Ok(Value::Table(t)) => Some(t),
        _ => None,
    }
}

fn write_table(out: &mut Vec<u8>, t: &Table, script_resp: u8, proto: Proto, depth: usize) {
    if let Some(err) = string_field(t, "err") {
        encode::error(out, &err.as_bytes());
        return;
    }
    if let Some(ok) = string_field(t, "ok") {
        encode::simple(out, &ok.as_bytes());
        return;
    }
    // mlua hands an integral Lua number over as an Integer: `{double=100}` is a double too.
    match t.raw_get::<Value>("double") {
        Ok(Value::Number(d)) => return encode::double(out, d, proto),
        Ok(Value::Integer(n)) => return encode::double(out, n as f64, proto),
        _ => {}
    }
    if let Some(n) = string_field(t, "big_number") {
        encode::big_number(out, &n.as_bytes(), proto);
        return;
    }
    if let Some(m) = table_field(t, "map") {
        let pairs: Vec<(Value, Value)> = m.pairs::<Value, Value>().filter_map(Result::ok).collect();
        encode::map_header(out, pairs.len(), proto);
        for (k, v) in &pairs {
            write_value(out, k, script_resp, proto, depth);
            write_value(out, v, script_resp, proto, depth);
        }
        return;
    }
    if let Some(s) = table_field(t, "set") {
        let members: Vec<Value> = s
            .pairs::<Value, Value>()
            .filter_map(|p| p.ok().map(|(k, _)| k))
            .collect();
        encode::set_header(out, members.len(), proto);
        for m in &members {
            write_value(out, m, script_resp, proto, depth);
        }
        return;
    }
    if let Some(v) = table_field(t, "verbatim_string") {
        if let (Some(format), Some(text)) = (string_field(&v, "format"), string_field(&v, "string"))
        {
            let format = format.as_bytes();
            let text = text.as_bytes();
            match proto {
                Proto::Resp3 => {
                    out.push(b'=');
                    out.extend_from_slice((format.len() + 1 + text.len()).to_string().as_bytes());
                    out.extend_from_slice(b"\r\n");
                    out.extend_from_slice(&format);
                    out.push(b':');
                    out.extend_from_slice(&text);
                    out.extend_from_slice(b"\r\n");
                }
                Proto::Resp2 => encode::bulk(out, &text),
            }
            return;
        }
    }
    let mut items = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(v),
        }
    }
    encode::array_header(out, items.len());
    for v in &items {
        write_value(out, v, script_resp, proto, depth);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(lua: &Lua, code: &str, resp: u8, proto: Proto) -> Vec<u8> {
        let v: Value = lua.load(code).eval().unwrap();
        let mut out = Vec::new();
        write_reply(&mut out, &v, resp, proto);
        out
    }

    #[test]
    fn lua_to_resp() {
        let lua = Lua::new();
        let r2 = Proto::Resp2;
        let r3 = Proto::Resp3;
        assert_eq!(reply(&lua, "return 3.7", 2, r2), b":3\r\n");
        assert_eq!(reply(&lua, "return -3.7", 2, r2), b":-3\r\n");
        assert_eq!(
            reply(&lua, "return 1e20", 2, r2),
            b":-9223372036854775808\r\n"
        );
        assert_eq!(
            reply(&lua, "return {1,'a',nil,2}", 2, r2),
            b"*2\r\n:1\r\n$1\r\na\r\n"
        );
        assert_eq!(
            reply(&lua, "return {true,false}", 2, r2),
            b"*2\r\n:1\r\n$-1\r\n"
        );
        assert_eq!(
            reply(&lua, "return {true,false}", 2, r3),
            b"*2\r\n:1\r\n_\r\n"
        );
        assert_eq!(
            reply(&lua, "return {true,false}", 3, r3),
            b"*2\r\n#t\r\n#f\r\n"
        );
        assert_eq!(
            reply(&lua, "return {true,false}", 3, r2),
            b"*2\r\n:1\r\n:0\r\n"
        );
        assert_eq!(reply(&lua, "return {err='x\\ny'}", 2, r2), b"-x y\r\n");
        assert_eq!(reply(&lua, "return {ok='fine'}", 2, r2), b"+fine\r\n");
        assert_eq!(reply(&lua, "return {double=1.5}", 2, r3), b",1.5\r\n");
        assert_eq!(reply(&lua, "return {double=1.5}", 2, r2), b"$3\r\n1.5\r\n");
        assert_eq!(reply(&lua, "return {double=100}", 2, r2), b"$3\r\n100\r\n");
        assert_eq!(
            reply(&lua, "return {map={a=1}}", 2, r3),
            b"%1\r\n$1\r\na\r\n:1\r\n"
        );
        assert_eq!(
            reply(&lua, "return {map={a=1}}", 2, r2),
            b"*2\r\n$1\r\na\r\n:1\r\n"
        );
        assert_eq!(
            reply(&lua, "return {set={a=1}}", 2, r3),
            b"~1\r\n$1\r\na\r\n"
        );
        assert_eq!(reply(&lua, "return {big_number='12'}", 2, r3), b"(12\r\n");
        assert_eq!(
            reply(
                &lua,
                "return {verbatim_string={format='txt',string='hi'}}",
                2,
                r3
            ),
            b"=6\r\ntxt:hi\r\n"
        );
        assert_eq!(reply(&lua, "return nil", 2, r2), b"$-1\r\n");
        assert_eq!(reply(&lua, "return nil", 2, r3), b"_\r\n");
        assert!(reply(&lua, "local t = {} t[1] = t return t", 2, r2)
            .ends_with(b"-ERR reached lua stack limit\r\n"));
    }

    #[test]
    fn resp_to_lua() {
        let lua = Lua::new();
        let f = Frame::Array(vec![
            Frame::Integer(3),
            Frame::Bulk(b"x".to_vec()),
            Frame::Null,
            Frame::Simple("OK".into()),
            Frame::Error("WRONGTYPE bad".into()),
        ]);
        let v = frame_to_lua(&lua, &f, 2).unwrap();
        lua.globals().set("v", v).unwrap();
        let s: String = lua
            .load("return v[1]..','..v[2]..','..tostring(v[3])..','..v[4].ok..','..v[5].err..','..tostring(v[5].ignore_error_stats_update)")
            .eval()
            .unwrap();
        assert_eq!(s, "3,x,false,OK,WRONGTYPE bad,true");
        let m = Frame::Map(vec![(Frame::Bulk(b"a".to_vec()), Frame::Double(1.5))]);
        lua.globals()
            .set("m", frame_to_lua(&lua, &m, 3).unwrap())
            .unwrap();
        let d: f64 = lua.load("return m.map.a.double").eval().unwrap();
        assert_eq!(d, 1.5);
        assert!(frame_to_lua(&lua, &Frame::Null, 3).unwrap().is_nil());
    }

    #[test]
    fn error_tables() {
        let lua = Lua::new();
        let get = |t: &[u8]| -> String { error_table(&lua, t).unwrap().get("err").unwrap() };
        assert_eq!(get(b"x"), "ERR x");
        assert_eq!(get(b"-x"), "ERR x");
        assert_eq!(get(b"-MY x y"), "MY x y");
        assert_eq!(get(b"plain words"), "ERR plain words");
        assert_eq!(get(b"-ERR x\r\n"), "ERR x");
    }
}
