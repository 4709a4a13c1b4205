//! `cjson`: JSON as lua-cjson 2.1 (Redis's copy) writes and reads it. Encoding: numbers as
//! `%.14g`, `/` escaped, a table is an array when all its keys are integers >= 1 (holes become
//! `null`, excessively sparse arrays are refused), otherwise an object; an empty table is
//! `{}`. Decoding: `null` is `cjson.null`, errors are lua-cjson's "Expected ... but found ...
//! at character N" texts.

use std::cell::Cell;
use std::rc::Rc;

use mlua::{LightUserData, Lua, MultiValue, Table, Value};

use crate::args::{arg_error, lib_fn, to_number, type_name, LibResult, Raise};
use crate::numfmt::format_g;

#[derive(Clone, Copy)]
struct Config {
    precision: usize,
    encode_max_depth: usize,
    decode_max_depth: usize,
    sparse_convert: bool,
    sparse_ratio: usize,
    sparse_safe: usize,
    keep_buffer: bool,
    encode_invalid: bool,
    decode_invalid: bool,
}

const DEFAULT: Config = Config {
    precision: 14,
    encode_max_depth: 1000,
    decode_max_depth: 1000,
    sparse_convert: false,
    sparse_ratio: 2,
    sparse_safe: 10,
    keep_buffer: true,
    encode_invalid: false,
    decode_invalid: true,
};

type Shared = Rc<Cell<Config>>;

fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

fn escape(c: u8) -> Option<&'static str> {
    const CTRL: [&str; 32] = [
        "\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005", "\\u0006", "\\u0007",
        "\\b", "\\t", "\\n", "\\u000b", "\\f", "\\r", "\\u000e", "\\u000f", "\\u0010", "\\u0011",
        "\\u0012", "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017", "\\u0018", "\\u0019",
        "\\u001a", "\\u001b", "\\u001c", "\\u001d", "\\u001e", "\\u001f",
    ];
    match c {
        0..=31 => Some(CTRL[c as usize]),
        b'"' => Some("\\\""),
        b'\\' => Some("\\\\"),
        b'/' => Some("\\/"),
        127 => Some("\\u007f"),
        _ => None,
    }
}

fn append_string(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &c in s {
        match escape(c) {
            Some(e) => out.extend_from_slice(e.as_bytes()),
            None => out.push(c),
        }
    }
    out.push(b'"');
}

fn append_number(out: &mut Vec<u8>, n: f64, cfg: &Config) -> Result<(), Raise> {
    if !n.is_finite() && !cfg.encode_invalid {
        return Err(Raise::Msg(
            "Cannot serialise number: must not be NaN or Inf".into(),
        ));
    }
    out.extend_from_slice(format_g(n, cfg.precision).as_bytes());
    Ok(())
}

/// lua-cjson's `lua_array_length`: `Some(max)` for an array, `None` for an object.
fn array_length(t: &Table, cfg: &Config) -> Result<Option<usize>, Raise> {
    let mut max = 0usize;
    let mut items = 0usize;
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        let k = match k {
            Value::Number(n) => n,
            Value::Integer(i) => i as f64,
            _ => return Ok(None),
        };
        if k != 0.0 && k.floor() == k && k >= 1.0 {
            max = max.max(k as usize);
            items += 1;
        } else {
            return Ok(None);
        }
    }
    if cfg.sparse_ratio > 0 && max > items * cfg.sparse_ratio && max > cfg.sparse_safe {
        if !cfg.sparse_convert {
            return Err(Raise::Msg(
                "Cannot serialise table: excessively sparse array".into(),
            ));
        }
        return Ok(None);
    }
    Ok(Some(max))
}

fn encode_value(out: &mut Vec<u8>, v: &Value, cfg: &Config, depth: usize) -> Result<(), Raise> {
    match v {
        Value::String(s) => append_string(out, &s.as_bytes()),
        Value::Number(n) => append_number(out, *n, cfg)?,
        Value::Integer(i) => append_number(out, *i as f64, cfg)?,
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Table(t) => {
            let depth = depth + 1;
            if depth > cfg.encode_max_depth {
                return Err(Raise::Msg(format!(
                    "Cannot serialise, excessive nesting ({depth})"
                )));
            }
            match array_length(t, cfg)? {
                Some(len) if len > 0 => {
                    out.push(b'[');
                    for i in 1..=len {
                        if i > 1 {
                            out.push(b',');
                        }
                        encode_value(out, &t.raw_get::<Value>(i)?, cfg, depth)?;
                    }
                    out.push(b']');
                }
                _ => {
                    out.push(b'{');
                    let mut first = true;
                    for pair in t.pairs::<Value, Value>() {
                        let (k, val) = pair?;
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        match &k {
                            Value::Number(n) => {
                                out.push(b'"');
                                append_number(out, *n, cfg)?;
                                out.extend_from_slice(b"\":");
                            }
                            Value::Integer(i) => {
                                out.push(b'"');
                                append_number(out, *i as f64, cfg)?;
                                out.extend_from_slice(b"\":");
                            }
                            Value::String(s) => {
                                append_string(out, &s.as_bytes());
                                out.push(b':');
                            }
                            other => {
                                return Err(Raise::Msg(format!(
                                    "Cannot serialise {}: table key must be a number or string",
                                    type_name(other)
                                )))
                            }
                        }
                        encode_value(out, &val, cfg, depth)?;
                    }
                    out.push(b'}');
                }
            }
        }
        other => {
            return Err(Raise::Msg(format!(
                "Cannot serialise {}: type not supported",
                type_name(other)
            )))
        }
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str,
    Num,
    Bool,
    Null,
    Colon,
    Comma,
    End,
    Error,
}

impl Tok {
    fn name(self) -> &'static str {
        match self {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str => "T_STRING",
            Tok::Num => "T_NUMBER",
            Tok::Bool => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Error => "T_ERROR",
        }
    }
}

struct Token {
    kind: Tok,
    index: usize,
    string: Vec<u8>,
    number: f64,
    boolean: bool,
    error: &'static str,
}

struct Decoder<'a> {
    data: &'a [u8],
    pos: usize,
    depth: usize,
    max_depth: usize,
}

/// `strtod`'s longest valid prefix at `s`: the value and the bytes consumed (0 = none).
fn strtod_prefix(s: &[u8]) -> (f64, usize) {
    let mut i = 0;
    let neg = matches!(s.first(), Some(b'-'));
    if matches!(s.first(), Some(b'-' | b'+')) {
        i += 1;
    }
    if s.len() > i + 2 && s[i] == b'0' && (s[i + 1] | 0x20) == b'x' && s[i + 2].is_ascii_hexdigit()
    {
        let mut j = i + 2;
        let mut v = 0f64;
        while j < s.len() && s[j].is_ascii_hexdigit() {
            v = v * 16.0 + f64::from((s[j] as char).to_digit(16).expect("hex"));
            j += 1;
        }
        return (if neg { -v } else { v }, j);
    }
    let digits_start = i;
    while i < s.len() && s[i].is_ascii_digit() {
        i += 1;
    }
    let mut mant_digits = i - digits_start;
    if i < s.len() && s[i] == b'.' {
        let f = i + 1;
        let mut j = f;
        while j < s.len() && s[j].is_ascii_digit() {
            j += 1;
        }
        mant_digits += j - f;
        if mant_digits > 0 {
            i = j;
        }
    }
    if mant_digits == 0 {
        return (0.0, 0);
    }
    if i < s.len() && (s[i] | 0x20) == b'e' {
        let mut j = i + 1;
        if j < s.len() && (s[j] == b'+' || s[j] == b'-') {
            j += 1;
        }
        let e = j;
        while j < s.len() && s[j].is_ascii_digit() {
            j += 1;
        }
        if j > e {
            i = j;
        }
    }
    let text = std::str::from_utf8(&s[..i]).unwrap_or("0");
    (text.parse().unwrap_or(0.0), i)
}

impl Decoder<'_> {
    fn peek(&self) -> u8 {
        self.data.get(self.pos).copied().unwrap_or(0)
    }

    fn error_token(&self, index: usize, msg: &'static str) -> Token {
        Token {
            kind: Tok::Error,
            index,
            string: Vec::new(),
            number: 0.0,
            boolean: false,
            error: msg,
        }
    }

    fn token(&self, kind: Tok, index: usize) -> Token {
        Token {
            kind,
            index,
            string: Vec::new(),
            number: 0.0,
            boolean: false,
            error: "",
        }
    }

    fn next(&mut self) -> Token {
        while matches!(self.peek(), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let start = self.pos;
        let ch = self.peek();
        let single = match ch {
            0 => return self.token(Tok::End, start),
            b'{' => Some(Tok::ObjBegin),
            b'}' => Some(Tok::ObjEnd),
            b'[' => Some(Tok::ArrBegin),
            b']' => Some(Tok::ArrEnd),
            b',' => Some(Tok::Comma),
            b':' => Some(Tok::Colon),
            _ => None,
        };
        if let Some(k) = single {
            self.pos += 1;
            return self.token(k, start);
        }
        let rest = &self.data[self.pos..];
        match ch {
            b'"' => self.string_token(),
            b'-' | b'0'..=b'9' => {
                let (v, used) = strtod_prefix(rest);
                if used == 0 {
                    return self.error_token(start, "invalid number");
                }
                self.pos += used;
                let mut t = self.token(Tok::Num, start);
                t.number = v;
                t
            }
            b't' if rest.starts_with(b"true") => {
                self.pos += 4;
                let mut t = self.token(Tok::Bool, start);
                t.boolean = true;
                t
            }
            b'f' if rest.starts_with(b"false") => {
                self.pos += 5;
                self.token(Tok::Bool, start)
            }
            b'n' if rest.starts_with(b"null") => {
                self.pos += 4;
                self.token(Tok::Null, start)
            }
            _ => self.error_token(start, "invalid token"),
        }
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let s = self.data.get(at..at + 4)?;
        let s = std::str::from_utf8(s).ok()?;
        if !s.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(s, 16).ok()
    }

    fn string_token(&mut self) -> Token {
        let start = self.pos;
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            let ch = self.peek();
            if ch == b'"' {
                break;
            }
            if ch == 0 {
                return self.error_token(self.pos, "unexpected end of string");
            }
            if ch == b'\\' {
                let esc = self.data.get(self.pos + 1).copied().unwrap_or(0);
                let tr = match esc {
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'/' => b'/',
                    b'b' => 8,
                    b'f' => 12,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'u' => match self.unicode_escape() {
                        Some((cp, used)) => {
                            let mut buf = [0u8; 4];
                            let c = char::from_u32(cp).unwrap_or('\u{fffd}');
                            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                            self.pos += used;
                            continue;
                        }
                        None => return self.error_token(self.pos, "invalid unicode escape code"),
                    },
                    _ => return self.error_token(self.pos, "invalid escape code"),
                };
                out.push(tr);
                self.pos += 2;
                continue;
            }
            out.push(ch);
            self.pos += 1;
        }
        self.pos += 1;
        let mut t = self.token(Tok::Str, start);
        t.string = out;
        t
    }

    /// `\uXXXX` (and its low surrogate) at `pos`: the code point and bytes used.
    fn unicode_escape(&self) -> Option<(u32, usize)> {
        let hi = self.hex4(self.pos + 2)?;
        if (0xDC00..=0xDFFF).contains(&hi) {
            return None;
        }
        if (0xD800..=0xDBFF).contains(&hi) {
            if self.data.get(self.pos + 6) != Some(&b'\\')
                || self.data.get(self.pos + 7) != Some(&b'u')
            {
                return None;
            }
            let lo = self.hex4(self.pos + 8)?;
            if !(0xDC00..=0xDFFF).contains(&lo) {
                return None;
            }
            return Some((0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00), 12));
        }
        Some((hi, 6))
    }

    fn fail(&self, expected: &str, t: &Token) -> Raise {
        let found = if t.kind == Tok::Error {
            t.error
        } else {
            t.kind.name()
        };
        Raise::Msg(format!(
            "Expected {expected} but found {found} at character {}",
            t.index + 1
        ))
    }

    fn descend(&mut self) -> Result<(), Raise> {
        self.depth += 1;
        if self.depth > self.max_depth {
            return Err(Raise::Msg(format!(
                "Found too many nested data structures ({}) at character {}",
                self.depth, self.pos
            )));
        }
        Ok(())
    }

    fn value(&mut self, lua: &Lua, t: Token) -> Result<Value, Raise> {
        Ok(match t.kind {
            Tok::Str => Value::String(lua.create_string(&t.string)?),
            Tok::Num => Value::Number(t.number),
            Tok::Bool => Value::Boolean(t.boolean),
            Tok::Null => null(),
            Tok::ObjBegin => {
                self.descend()?;
                let obj = lua.create_table()?;
                let mut tok = self.next();
                if tok.kind != Tok::ObjEnd {
                    loop {
                        if tok.kind != Tok::Str {
                            return Err(self.fail("object key string", &tok));
                        }
                        let key = lua.create_string(&tok.string)?;
                        let colon = self.next();
                        if colon.kind != Tok::Colon {
                            return Err(self.fail("colon", &colon));
                        }
                        let vt = self.next();
                        let v = self.value(lua, vt)?;
                        obj.raw_set(key, v)?;
                        let sep = self.next();
                        if sep.kind == Tok::ObjEnd {
                            break;
                        }
                        if sep.kind != Tok::Comma {
                            return Err(self.fail("comma or object end", &sep));
                        }
                        tok = self.next();
                    }
                }
                self.depth -= 1;
                Value::Table(obj)
            }
            Tok::ArrBegin => {
                self.descend()?;
                let arr = lua.create_table()?;
                let mut tok = self.next();
                if tok.kind != Tok::ArrEnd {
                    let mut i = 1;
                    loop {
                        let v = self.value(lua, tok)?;
                        arr.raw_set(i, v)?;
                        i += 1;
                        let sep = self.next();
                        if sep.kind == Tok::ArrEnd {
                            break;
                        }
                        if sep.kind != Tok::Comma {
                            return Err(self.fail("comma or array end", &sep));
                        }
                        tok = self.next();
                    }
                }
                self.depth -= 1;
                Value::Table(arr)
            }
            _ => return Err(self.fail("value", &t)),
        })
    }
}

fn encode(cfg: &Shared, args: &[Value]) -> Result<Vec<u8>, Raise> {
    if args.len() != 1 {
        return Err(arg_error(1, "encode", "expected 1 argument"));
    }
    let mut out = Vec::new();
    encode_value(&mut out, &args[0], &cfg.get(), 0)?;
    Ok(out)
}

fn decode(lua: &Lua, cfg: &Shared, args: &[Value]) -> LibResult {
    if args.len() != 1 {
        return Err(arg_error(1, "decode", "expected 1 argument"));
    }
    let data = crate::args::check_bytes(args, 0, "decode")?;
    if data.len() >= 2 && (data[0] == 0 || data[1] == 0) {
        return Err(Raise::Msg(
            "JSON parser does not support UTF-16 or UTF-32".into(),
        ));
    }
    let mut d = Decoder {
        data: &data,
        pos: 0,
        depth: 0,
        max_depth: cfg.get().decode_max_depth,
    };
    let first = d.next();
    let v = d.value(lua, first)?;
    let end = d.next();
    if end.kind != Tok::End {
        return Err(d.fail("the end", &end));
    }
    Ok(MultiValue::from_vec(vec![v]))
}

/// A config getter/setter: with an argument stores it (range-checked), always returns the
/// current value(s).
fn config_fn(
    lua: &Lua,
    cfg: &Shared,
    name: &'static str,
    get: fn(&Config) -> Vec<Value>,
    set: fn(&mut Config, &[Value]) -> Result<(), String>,
) -> mlua::Result<mlua::Function> {
    let cfg = cfg.clone();
    lib_fn(lua, move |_, args| {
        if !args.is_empty() {
            let mut c = cfg.get();
            set(&mut c, args).map_err(|m| arg_error(1, name, &m))?;
            cfg.set(c);
        }
        Ok(MultiValue::from_vec(get(&cfg.get())))
    })
}

fn int_arg(args: &[Value], lo: f64, hi: f64) -> Result<usize, String> {
    match args.first().and_then(to_number) {
        Some(n) if n >= lo && n <= hi => Ok(n as usize),
        _ => Err(format!("expected integer between {lo} and {hi}")),
    }
}

fn bool_arg(args: &[Value]) -> Result<bool, String> {
    match args.first() {
        Some(Value::Boolean(b)) => Ok(*b),
        Some(Value::String(s)) if s.as_bytes() == b"on".as_slice() => Ok(true),
        Some(Value::String(s)) if s.as_bytes() == b"off".as_slice() => Ok(false),
        _ => Err("invalid option".into()),
    }
}

/// Builds the raw `cjson` table.
pub(crate) fn create(lua: &Lua) -> mlua::Result<Table> {
    let cfg: Shared = Rc::new(Cell::new(DEFAULT));
    let t = lua.create_table()?;
    let c = cfg.clone();
    t.set(
        "encode",
        lib_fn(lua, move |lua, args| {
            let out = encode(&c, args)?;
            Ok(MultiValue::from_vec(vec![Value::String(
                lua.create_string(&out)?,
            )]))
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "decode",
        lib_fn(lua, move |lua, args| decode(lua, &c, args))?,
    )?;
    t.set(
        "encode_number_precision",
        config_fn(
            lua,
            &cfg,
            "encode_number_precision",
            |c| vec![Value::Number(c.precision as f64)],
            |c, a| {
                c.precision = int_arg(a, 1.0, 14.0)?;
                Ok(())
            },
        )?,
    )?;
    t.set(
        "encode_max_depth",
        config_fn(
            lua,
            &cfg,
            "encode_max_depth",
            |c| vec![Value::Number(c.encode_max_depth as f64)],
            |c, a| {
                c.encode_max_depth = int_arg(a, 1.0, f64::from(i32::MAX))?;
                Ok(())
            },
        )?,
    )?;
    t.set(
        "decode_max_depth",
        config_fn(
            lua,
            &cfg,
            "decode_max_depth",
            |c| vec![Value::Number(c.decode_max_depth as f64)],
            |c, a| {
                c.decode_max_depth = int_arg(a, 1.0, f64::from(i32::MAX))?;
                Ok(())
            },
        )?,
    )?;
    t.set(
        "encode_sparse_array",
        config_fn(
            lua,
            &cfg,
            "encode_sparse_array",
            |c| {
                vec![
                    Value::Boolean(c.sparse_convert),
                    Value::Number(c.sparse_ratio as f64),
                    Value::Number(c.sparse_safe as f64),
                ]
            },
            |c, a| {
                c.sparse_convert = bool_arg(a)?;
                if a.len() > 1 {
                    c.sparse_ratio = int_arg(&a[1..], 0.0, f64::from(i32::MAX))?;
                }
                if a.len() > 2 {
                    c.sparse_safe = int_arg(&a[2..], 0.0, f64::from(i32::MAX))?;
                }
                Ok(())
            },
        )?,
    )?;
    t.set(
        "encode_keep_buffer",
        config_fn(
            lua,
            &cfg,
            "encode_keep_buffer",
            |c| vec![Value::Boolean(c.keep_buffer)],
            |c, a| {
                c.keep_buffer = bool_arg(a)?;
                Ok(())
            },
        )?,
    )?;
    t.set(
        "encode_invalid_numbers",
        config_fn(
            lua,
            &cfg,
            "encode_invalid_numbers",
            |c| vec![Value::Boolean(c.encode_invalid)],
            |c, a| {
                c.encode_invalid = bool_arg(a)?;
                Ok(())
            },
        )?,
    )?;
    t.set(
        "decode_invalid_numbers",
        config_fn(
            lua,
            &cfg,
            "decode_invalid_numbers",
            |c| vec![Value::Boolean(c.decode_invalid)],
            |c, a| {
                c.decode_invalid = bool_arg(a)?;
                Ok(())
            },
        )?,
    )?;
    t.set("new", lib_fn(lua, |_, _| Ok(MultiValue::new()))?)?;
    t.set("null", null())?;
    t.set("_NAME", "cjson")?;
    t.set("_VERSION", "2.1.0")?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::libs::test_util::{call, text};

    #[test]
    fn encode_like_lua_cjson() {
        let lua = Lua::new();
        let t = create(&lua).unwrap();
        let enc = |args: &str| call(&lua, &t, "encode", args).map(|v| text(&v[0]));
        assert_eq!(
            enc("{1, 'a/b', 0.1, 1e20, true}").unwrap(),
            br#"[1,"a\/b",0.1,1e+20,true]"#
        );
        assert_eq!(enc("{}").unwrap(), b"{}");
        assert_eq!(enc("{a = {}}").unwrap(), br#"{"a":{}}"#);
        assert_eq!(enc("{[1] = 1, [3] = 3}").unwrap(), b"[1,null,3]");
        assert_eq!(enc("'\\1\\n'").unwrap(), br#""\u0001\n""#);
        assert_eq!(
            enc("{[1] = 1, [20] = 2}").unwrap_err(),
            "Cannot serialise table: excessively sparse array"
        );
        assert_eq!(
            enc("1/0").unwrap_err(),
            "Cannot serialise number: must not be NaN or Inf"
        );
    }

    #[test]
    fn decode_like_lua_cjson() {
        let lua = Lua::new();
        let t = create(&lua).unwrap();
        let dec = |args: &str| call(&lua, &t, "decode", args);
        let v = dec(r#"'{"a":[1,2.5,"x",null,true]}'"#).unwrap();
        lua.globals().set("v", v[0].clone()).unwrap();
        let s: String = lua
            .load("return v.a[1]..v.a[2]..v.a[3]..type(v.a[4])..tostring(v.a[5])")
            .eval()
            .unwrap();
        assert_eq!(s, "12.5xuserdatatrue");
        assert_eq!(text(&dec(r#"'"\\u00e9"'"#).unwrap()[0]), "é".as_bytes());
        assert_eq!(
            dec("'[1,2'").unwrap_err(),
            "Expected comma or array end but found T_END at character 5"
        );
        assert_eq!(
            dec("'tru'").unwrap_err(),
            "Expected value but found invalid token at character 1"
        );
    }
}
