//! `cmsgpack`: MessagePack as lua-cmsgpack 0.4 (Redis's copy) packs and unpacks it. Integral
//! numbers take the smallest integer form, other numbers a float32 when exact else a float64;
//! a table whose keys are exactly 1..n is an array (an empty table too), else a map; tables
//! nested deeper than 16 pack as nil. Unpacking returns every top-level value.

use mlua::{Lua, MultiValue, Table, Value};

use crate::args::{arg_error, check_bytes, check_number, lib_fn, LibResult, Raise};

const MAX_NESTING: usize = 16;
/// Deepest structure `unpack` builds (lua-cmsgpack has no limit but the C stack's).
const MAX_DECODE_DEPTH: usize = 1000;

fn w<T, E: std::fmt::Debug>(r: Result<T, E>) {
    r.expect("writing to a Vec cannot fail");
}

fn pack_number(out: &mut Vec<u8>, n: f64) {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if (-TWO_63..TWO_63).contains(&n) && (n as i64) as f64 == n {
        w(rmp::encode::write_sint(out, n as i64));
    } else if (n as f32) as f64 == n || n.is_infinite() {
        w(rmp::encode::write_f32(out, n as f32));
    } else {
        w(rmp::encode::write_f64(out, n));
    }
}

fn is_array(t: &Table) -> mlua::Result<bool> {
    let mut count = 0usize;
    let mut max = 0f64;
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        let n = match k {
            Value::Number(n) => n,
            Value::Integer(i) => i as f64,
            _ => return Ok(false),
        };
        if n <= 0.0 || (n as i32) as f64 != n {
            return Ok(false);
        }
        max = max.max(n);
        count += 1;
    }
    Ok(max as usize == count)
}

fn pack_value(out: &mut Vec<u8>, v: &Value, level: usize) -> mlua::Result<()> {
    match v {
        Value::String(s) => {
            let b = s.as_bytes();
            w(rmp::encode::write_str_len(out, b.len() as u32));
            out.extend_from_slice(&b);
        }
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Number(n) => pack_number(out, *n),
        Value::Integer(i) => pack_number(out, *i as f64),
        Value::Table(t) if level < MAX_NESTING => {
            if is_array(t)? {
                let len = t.raw_len();
                w(rmp::encode::write_array_len(out, len as u32));
                for i in 1..=len {
                    pack_value(out, &t.raw_get::<Value>(i)?, level + 1)?;
                }
            } else {
                let pairs: Vec<(Value, Value)> =
                    t.pairs::<Value, Value>().collect::<mlua::Result<_>>()?;
                w(rmp::encode::write_map_len(out, pairs.len() as u32));
                for (k, val) in &pairs {
                    pack_value(out, k, level + 1)?;
                    pack_value(out, val, level + 1)?;
                }
            }
        }
        _ => out.push(0xc0),
    }
    Ok(())
}

fn pack(lua: &Lua, args: &[Value]) -> LibResult {
    if args.is_empty() {
        return Err(arg_error(0, "pack", "MessagePack pack needs input."));
    }
    let mut out = Vec::new();
    for a in args {
        pack_value(&mut out, a, 0)?;
    }
    Ok(MultiValue::from_vec(vec![Value::String(
        lua.create_string(&out)?,
    )]))
}

/// The input ended inside a value.
#[derive(Debug)]
struct Eof;

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn left(&self) -> usize {
        self.data.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&[u8], Eof> {
        if self.left() < n {
            return Err(Eof);
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn be(&mut self, n: usize) -> Result<u64, Eof> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    fn value(&mut self, lua: &Lua, depth: usize) -> Result<Value, Raise> {
        if depth > MAX_DECODE_DEPTH {
            return Err(bad_format());
        }
        let m = self.take(1).map_err(map_err)?[0];
        let num = |v: f64| Ok(Value::Number(v));
        match m {
            0x00..=0x7f => num(f64::from(m)),
            0xe0..=0xff => num(f64::from(m as i8)),
            0xcc => num(self.be(1).map_err(map_err)? as f64),
            0xcd => num(self.be(2).map_err(map_err)? as f64),
            0xce => num(self.be(4).map_err(map_err)? as f64),
            0xcf => num(self.be(8).map_err(map_err)? as f64),
            0xd0 => num(f64::from(self.be(1).map_err(map_err)? as u8 as i8)),
            0xd1 => num(f64::from(self.be(2).map_err(map_err)? as u16 as i16)),
            0xd2 => num(f64::from(self.be(4).map_err(map_err)? as u32 as i32)),
            0xd3 => num(self.be(8).map_err(map_err)? as i64 as f64),
            0xc0 => Ok(Value::Nil),
            0xc2 => Ok(Value::Boolean(false)),
            0xc3 => Ok(Value::Boolean(true)),
            0xca => num(f64::from(f32::from_bits(
                self.be(4).map_err(map_err)? as u32
            ))),
            0xcb => num(f64::from_bits(self.be(8).map_err(map_err)?)),
            0xa0..=0xbf => self.string(lua, usize::from(m & 0x1f)),
            0xd9 | 0xc4 => {
                let n = self.be(1).map_err(map_err)? as usize;
                self.string(lua, n)
            }
            0xda | 0xc5 => {
                let n = self.be(2).map_err(map_err)? as usize;
                self.string(lua, n)
            }
            0xdb | 0xc6 => {
                let n = self.be(4).map_err(map_err)? as usize;
                self.string(lua, n)
            }
            0x90..=0x9f => self.array(lua, usize::from(m & 0x0f), depth),
            0xdc => {
                let n = self.be(2).map_err(map_err)? as usize;
                self.array(lua, n, depth)
            }
            0xdd => {
                let n = self.be(4).map_err(map_err)? as usize;
                self.array(lua, n, depth)
            }
            0x80..=0x8f => self.map(lua, usize::from(m & 0x0f), depth),
            0xde => {
                let n = self.be(2).map_err(map_err)? as usize;
                self.map(lua, n, depth)
            }
            0xdf => {
                let n = self.be(4).map_err(map_err)? as usize;
                self.map(lua, n, depth)
            }
            _ => Err(bad_format()),
        }
    }

    fn string(&mut self, lua: &Lua, n: usize) -> Result<Value, Raise> {
        let s = self.take(n).map_err(map_err)?;
        Ok(Value::String(lua.create_string(s)?))
    }

    fn array(&mut self, lua: &Lua, n: usize, depth: usize) -> Result<Value, Raise> {
        let t = lua.create_table_with_capacity(n.min(1024), 0)?;
        for i in 1..=n {
            let v = self.value(lua, depth + 1)?;
            t.raw_set(i, v)?;
        }
        Ok(Value::Table(t))
    }

    fn map(&mut self, lua: &Lua, n: usize, depth: usize) -> Result<Value, Raise> {
        let t = lua.create_table_with_capacity(0, n.min(1024))?;
        for _ in 0..n {
            let k = self.value(lua, depth + 1)?;
            let v = self.value(lua, depth + 1)?;
            if k.is_nil() {
                return Err(Raise::Msg("table index is nil".into()));
            }
            t.raw_set(k, v)?;
        }
        Ok(Value::Table(t))
    }
}

fn bad_format() -> Raise {
    Raise::Msg("Bad data format in input.".into())
}

fn map_err(_: Eof) -> Raise {
    Raise::Msg("Missing bytes in input.".into())
}

/// lua-cmsgpack's `mp_unpack_full`: `limit` values from `offset` (both 0: everything, and no
/// offset result).
fn unpack_full(lua: &Lua, data: &[u8], limit: i64, offset: i64) -> LibResult {
    let decode_all = limit == 0 && offset == 0;
    if offset < 0 || limit < 0 {
        return Err(Raise::Msg(format!(
            "Invalid request to unpack with offset of {offset} and limit of {}.",
            data.len()
        )));
    }
    if offset as usize > data.len() {
        return Err(Raise::Msg(format!(
            "Start offset {offset} greater than input length {}.",
            data.len()
        )));
    }
    let limit = if decode_all { i64::MAX } else { limit };
    let mut c = Cursor {
        data,
        pos: offset as usize,
    };
    let mut vals = Vec::new();
    let mut cnt = 0;
    while c.left() > 0 && cnt < limit {
        vals.push(c.value(lua, 0)?);
        cnt += 1;
    }
    if !decode_all {
        let next = if c.left() == 0 { -1 } else { c.pos as i64 };
        vals.insert(0, Value::Number(next as f64));
    }
    Ok(MultiValue::from_vec(vals))
}

/// Builds the raw `cmsgpack` table.
pub(crate) fn create(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("pack", lib_fn(lua, pack)?)?;
    t.set(
        "unpack",
        lib_fn(lua, |lua, a| {
            let data = check_bytes(a, 0, "unpack")?;
            unpack_full(lua, &data, 0, 0)
        })?,
    )?;
    t.set(
        "unpack_one",
        lib_fn(lua, |lua, a| {
            let data = check_bytes(a, 0, "unpack_one")?;
            let offset = crate::args::opt_number(a, 1, "unpack_one", 0.0)? as i64;
            unpack_full(lua, &data, 1, offset)
        })?,
    )?;
    t.set(
        "unpack_limit",
        lib_fn(lua, |lua, a| {
            let data = check_bytes(a, 0, "unpack_limit")?;
            let limit = check_number(a, 1, "unpack_limit")? as i64;
            let offset = crate::args::opt_number(a, 2, "unpack_limit", 0.0)? as i64;
            unpack_full(lua, &data, limit, offset)
        })?,
    )?;
    t.set("_NAME", "cmsgpack")?;
    t.set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::libs::test_util::{call, text};

    #[test]
    fn pack_picks_smallest_forms() {
        let lua = Lua::new();
        let t = create(&lua).unwrap();
        let pack = |args: &str| text(&call(&lua, &t, "pack", args).unwrap()[0]);
        assert_eq!(
            pack("1, -1, 200, -200"),
            [0x01, 0xff, 0xcc, 200, 0xd1, 0xff, 0x38]
        );
        assert_eq!(pack("1.5"), [0xca, 0x3f, 0xc0, 0, 0]);
        assert_eq!(pack("0.1")[0], 0xcb);
        assert_eq!(pack("'ab'"), [0xa2, b'a', b'b']);
        assert_eq!(pack("{}"), [0x90]);
        assert_eq!(pack("{1, 2}"), [0x92, 1, 2]);
        assert_eq!(pack("{a = true}"), [0x81, 0xa1, b'a', 0xc3]);
        assert_eq!(pack("nil, false"), [0xc0, 0xc2]);
    }

    #[test]
    fn unpack_round_trips_and_reports_errors() {
        let lua = Lua::new();
        let t = create(&lua).unwrap();
        let r = call(&lua, &t, "unpack", "'\\1\\162ab\\192'").unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(text(&r[1]), b"ab");
        assert!(r[2].is_nil());
        assert_eq!(
            call(&lua, &t, "unpack", "'\\205\\1'").unwrap_err(),
            "Missing bytes in input."
        );
        assert_eq!(
            call(&lua, &t, "unpack", "'\\193'").unwrap_err(),
            "Bad data format in input."
        );
        let r = call(&lua, &t, "unpack_one", "'\\1\\2'").unwrap();
        assert_eq!((text(&r[0]), text(&r[1])), (b"1".to_vec(), b"1".to_vec()));
    }
}
