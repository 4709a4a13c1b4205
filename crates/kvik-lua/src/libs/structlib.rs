//! `struct`: binary packing as Roberto Ierusalimschy's `struct` library that Redis bundles
//! (`pack`, `unpack`, `size`). Native order is little-endian, `long` and `size_t` are 8 bytes,
//! `!` aligns to at most 8.

use mlua::{Lua, MultiValue, Table, Value};

use crate::args::{arg_error, check_bytes, check_number, lib_fn, to_number, LibResult, Raise};

const MAXINTSIZE: usize = 32;
const MAXALIGN: usize = 8;

#[derive(Clone, Copy)]
struct Header {
    little: bool,
    align: usize,
}

impl Default for Header {
    fn default() -> Self {
        Header {
            little: true,
            align: 1,
        }
    }
}

struct Fmt<'a> {
    s: &'a [u8],
    i: usize,
}

impl Fmt<'_> {
    fn getnum(&mut self, default: usize) -> Result<usize, Raise> {
        if !self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
            return Ok(default);
        }
        let mut a: usize = 0;
        while let Some(c) = self.s.get(self.i).filter(|c| c.is_ascii_digit()) {
            let d = usize::from(c - b'0');
            if a > (i32::MAX as usize) / 10 || a * 10 > i32::MAX as usize - d {
                return Err(Raise::Msg("integral size overflow".into()));
            }
            a = a * 10 + d;
            self.i += 1;
        }
        Ok(a)
    }

    fn optsize(&mut self, opt: u8) -> Result<usize, Raise> {
        Ok(match opt {
            b'B' | b'b' | b'x' => 1,
            b'H' | b'h' => 2,
            b'L' | b'l' | b'T' | b'd' => 8,
            b'f' => 4,
            b'c' => self.getnum(1)?,
            b'i' | b'I' => {
                let sz = self.getnum(4)?;
                if sz > MAXINTSIZE {
                    return Err(Raise::Msg(format!(
                        "integral size {sz} is larger than limit of {MAXINTSIZE}"
                    )));
                }
                sz
            }
            _ => 0,
        })
    }

    fn control(&mut self, opt: u8, h: &mut Header, fname: &str) -> Result<(), Raise> {
        match opt {
            b' ' => {}
            b'>' => h.little = false,
            b'<' => h.little = true,
            b'!' => {
                let a = self.getnum(MAXALIGN)?;
                if !a.is_power_of_two() {
                    return Err(Raise::Msg(format!("alignment {a} is not a power of 2")));
                }
                h.align = a;
            }
            _ => {
                return Err(arg_error(
                    1,
                    fname,
                    &format!("invalid format option '{}'", opt as char),
                ))
            }
        }
        Ok(())
    }
}

fn gettoalign(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size - (len & (size - 1))) & (size - 1)
}

fn put_integer(out: &mut Vec<u8>, n: f64, little: bool, size: usize) {
    let mut value: u64 = if n < 0.0 {
        crate::numfmt::c_double_to_i64(n) as u64
    } else if n >= 18_446_744_073_709_551_616.0 {
        0
    } else {
        n as u64
    };
    let mut buf = vec![0u8; size];
    for i in 0..size {
        let idx = if little { i } else { size - 1 - i };
        buf[idx] = (value & 0xff) as u8;
        value = value.checked_shr(8).unwrap_or(0);
    }
    out.extend_from_slice(&buf);
}

fn pack(lua: &Lua, args: &[Value]) -> LibResult {
    let fmt = check_bytes(args, 0, "pack")?;
    // The C code pushes a nil after the arguments: a missing one reads as nil.
    let mut padded = args.to_vec();
    padded.push(Value::Nil);
    let args = &padded[..];
    let mut f = Fmt { s: &fmt, i: 0 };
    let mut h = Header::default();
    let mut arg = 1;
    let mut out = Vec::new();
    while f.i < f.s.len() {
        let opt = f.s[f.i];
        f.i += 1;
        let mut size = f.optsize(opt)?;
        let pad = gettoalign(out.len(), &h, opt, size);
        out.resize(out.len() + pad, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = check_number(args, arg, "pack")?;
                arg += 1;
                put_integer(&mut out, n, h.little, size);
            }
            b'x' => out.push(0),
            b'f' => {
                let v = check_number(args, arg, "pack")? as f32;
                arg += 1;
                out.extend_from_slice(&if h.little {
                    v.to_le_bytes()
                } else {
                    v.to_be_bytes()
                });
            }
            b'd' => {
                let v = check_number(args, arg, "pack")?;
                arg += 1;
                out.extend_from_slice(&if h.little {
                    v.to_le_bytes()
                } else {
                    v.to_be_bytes()
                });
            }
            b'c' | b's' => {
                let s = check_bytes(args, arg, "pack")?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    return Err(arg_error(arg + 1, "pack", "string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => f.control(opt, &mut h, "pack")?,
        }
    }
    Ok(MultiValue::from_vec(vec![Value::String(
        lua.create_string(&out)?,
    )]))
}

fn get_integer(b: &[u8], little: bool, signed: bool) -> f64 {
    let mut l: u64 = 0;
    let size = b.len();
    for i in 0..size {
        let byte = if little { b[size - 1 - i] } else { b[i] };
        l = (l << 8) | u64::from(byte);
    }
    if !signed {
        return l as f64;
    }
    let bits = (size * 8).min(64);
    let mask = u64::MAX.checked_shl(bits as u32 - 1).unwrap_or(0);
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

fn unpack(lua: &Lua, args: &[Value]) -> LibResult {
    let fmt = check_bytes(args, 0, "unpack")?;
    let data = check_bytes(args, 1, "unpack")?;
    let start = match args.get(2) {
        None | Some(Value::Nil) => 1,
        Some(_) => crate::numfmt::c_double_to_i64(check_number(args, 2, "unpack")?),
    };
    let mut pos = (start - 1) as usize;
    if start < 1 || pos > data.len() {
        return Err(arg_error(3, "unpack", "offset must be 1 or greater"));
    }
    let mut f = Fmt { s: &fmt, i: 0 };
    let mut h = Header::default();
    let mut res: Vec<Value> = Vec::new();
    let too_short = || arg_error(2, "unpack", "data string too short");
    while f.i < f.s.len() {
        let opt = f.s[f.i];
        f.i += 1;
        let mut size = f.optsize(opt)?;
        pos += gettoalign(pos, &h, opt, size);
        if pos + size > data.len() {
            return Err(too_short());
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let signed = opt.is_ascii_lowercase();
                res.push(Value::Number(get_integer(
                    &data[pos..pos + size],
                    h.little,
                    signed,
                )));
            }
            b'x' => {}
            b'f' => {
                let b: [u8; 4] = data[pos..pos + 4].try_into().expect("4 bytes");
                let v = if h.little {
                    f32::from_le_bytes(b)
                } else {
                    f32::from_be_bytes(b)
                };
                res.push(Value::Number(f64::from(v)));
            }
            b'd' => {
                let b: [u8; 8] = data[pos..pos + 8].try_into().expect("8 bytes");
                let v = if h.little {
                    f64::from_le_bytes(b)
                } else {
                    f64::from_be_bytes(b)
                };
                res.push(Value::Number(v));
            }
            b'c' => {
                if size == 0 {
                    let prev = match res.last() {
                        Some(v) => to_number(v),
                        None => to_number(&args[1]),
                    };
                    let Some(n) = prev else {
                        return Err(Raise::Msg("format `c0' needs a previous size".into()));
                    };
                    if !res.is_empty() {
                        res.pop();
                    }
                    size = n as usize;
                    if pos + size > data.len() {
                        return Err(too_short());
                    }
                }
                res.push(Value::String(lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let Some(e) = data[pos..].iter().position(|&c| c == 0) else {
                    return Err(Raise::Msg("unfinished string in data".into()));
                };
                res.push(Value::String(lua.create_string(&data[pos..pos + e])?));
                size = e + 1;
            }
            _ => f.control(opt, &mut h, "unpack")?,
        }
        pos += size;
    }
    res.push(Value::Number((pos + 1) as f64));
    Ok(MultiValue::from_vec(res))
}

fn size(_: &Lua, args: &[Value]) -> LibResult {
    let fmt = check_bytes(args, 0, "size")?;
    let mut f = Fmt { s: &fmt, i: 0 };
    let mut h = Header::default();
    let mut pos = 0usize;
    while f.i < f.s.len() {
        let opt = f.s[f.i];
        f.i += 1;
        let size = f.optsize(opt)?;
        pos += gettoalign(pos, &h, opt, size);
        if opt == b's' {
            return Err(arg_error(1, "size", "option 's' has no fixed size"));
        } else if opt == b'c' && size == 0 {
            return Err(arg_error(1, "size", "option 'c0' has no fixed size"));
        }
        if !opt.is_ascii_alphanumeric() {
            f.control(opt, &mut h, "size")?;
        }
        pos += size;
    }
    Ok(MultiValue::from_vec(vec![Value::Number(pos as f64)]))
}

/// Builds the raw `struct` table.
pub(crate) fn create(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("pack", lib_fn(lua, pack)?)?;
    t.set("unpack", lib_fn(lua, unpack)?)?;
    t.set("size", lib_fn(lua, size)?)?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::libs::test_util::{call, text};

    #[test]
    fn pack_unpack_size() {
        let lua = Lua::new();
        let t = create(&lua).unwrap();
        let packed = text(&call(&lua, &t, "pack", "'>I2 <i4 b', 258, -2, -1").unwrap()[0]);
        assert_eq!(packed, [1, 2, 0xfe, 0xff, 0xff, 0xff, 0xff]);
        let packed = text(&call(&lua, &t, "pack", "'!4 b i4', 1, 2").unwrap()[0]);
        assert_eq!(packed, [1, 0, 0, 0, 2, 0, 0, 0]);
        let r = call(
            &lua,
            &t,
            "unpack",
            "'>I2 <i4 b', '\\1\\2\\254\\255\\255\\255\\255'",
        )
        .unwrap();
        let r: Vec<Vec<u8>> = r.iter().map(text).collect();
        assert_eq!(
            r,
            vec![
                b"258".to_vec(),
                b"-2".to_vec(),
                b"-1".to_vec(),
                b"8".to_vec()
            ]
        );
        let r = call(&lua, &t, "unpack", "'s c2', 'hi\\0xy'").unwrap();
        assert_eq!(text(&r[0]), b"hi");
        assert_eq!(text(&r[1]), b"xy");
        assert_eq!(text(&call(&lua, &t, "size", "'i4 d'").unwrap()[0]), b"12");
        assert_eq!(text(&call(&lua, &t, "size", "'!8 b d'").unwrap()[0]), b"16");
        assert_eq!(
            call(&lua, &t, "pack", "'y', 1").unwrap_err(),
            "bad argument #1 to 'pack' (invalid format option 'y')"
        );
        assert_eq!(
            call(&lua, &t, "unpack", "'i4', 'ab'").unwrap_err(),
            "bad argument #2 to 'unpack' (data string too short)"
        );
    }
}
