//! `bit`: LuaBitOp 1.0 on 32-bit integers. Arguments are converted the way LuaBitOp does
//! (round to nearest through the 2^52+2^51 trick, keep the low 32 bits) and results are signed.

use mlua::{Lua, MultiValue, Table, Value};

use crate::args::{arg_error, lib_fn, to_number, type_name, LibResult, Raise};

/// LuaBitOp's `barg`: the argument's low 32 bits after rounding.
fn barg(args: &[Value], i: usize, fname: &str) -> Result<u32, Raise> {
    let v = args.get(i).unwrap_or(&Value::Nil);
    let n = to_number(v);
    let b = (n.unwrap_or(0.0) + 6_755_399_441_055_744.0).to_bits() as u32;
    if b == 0 && n.is_none() {
        let got = args.get(i).map_or("no value", type_name);
        return Err(arg_error(
            i + 1,
            fname,
            &format!("number expected, got {got}"),
        ));
    }
    Ok(b)
}

fn ret(b: u32) -> LibResult {
    Ok(MultiValue::from_vec(vec![Value::Number(f64::from(
        b as i32,
    ))]))
}

fn fold(args: &[Value], name: &str, f: fn(u32, u32) -> u32) -> LibResult {
    let mut acc = barg(args, 0, name)?;
    for i in 1..args.len() {
        acc = f(acc, barg(args, i, name)?);
    }
    ret(acc)
}

fn shift(args: &[Value], name: &str, f: fn(u32, u32) -> u32) -> LibResult {
    let b = barg(args, 0, name)?;
    let n = barg(args, 1, name)? & 31;
    ret(f(b, n))
}

fn tohex(lua: &Lua, args: &[Value]) -> LibResult {
    let mut b = barg(args, 0, "tohex")?;
    let mut n = if args.len() < 2 {
        8
    } else {
        barg(args, 1, "tohex")? as i32
    };
    let digits: &[u8; 16] = if n < 0 {
        n = n.wrapping_neg();
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let n = n.clamp(0, 8) as usize;
    let mut buf = [0u8; 8];
    for i in (0..n).rev() {
        buf[i] = digits[(b & 15) as usize];
        b >>= 4;
    }
    Ok(MultiValue::from_vec(vec![Value::String(
        lua.create_string(&buf[..n])?,
    )]))
}

/// Builds the raw `bit` table.
pub(crate) fn create(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("tobit", lib_fn(lua, |_, a| ret(barg(a, 0, "tobit")?))?)?;
    t.set("bnot", lib_fn(lua, |_, a| ret(!barg(a, 0, "bnot")?))?)?;
    t.set(
        "bswap",
        lib_fn(lua, |_, a| ret(barg(a, 0, "bswap")?.swap_bytes()))?,
    )?;
    t.set("band", lib_fn(lua, |_, a| fold(a, "band", |x, y| x & y))?)?;
    t.set("bor", lib_fn(lua, |_, a| fold(a, "bor", |x, y| x | y))?)?;
    t.set("bxor", lib_fn(lua, |_, a| fold(a, "bxor", |x, y| x ^ y))?)?;
    t.set(
        "lshift",
        lib_fn(lua, |_, a| shift(a, "lshift", |b, n| b << n))?,
    )?;
    t.set(
        "rshift",
        lib_fn(lua, |_, a| shift(a, "rshift", |b, n| b >> n))?,
    )?;
    t.set(
        "arshift",
        lib_fn(lua, |_, a| {
            shift(a, "arshift", |b, n| ((b as i32) >> n) as u32)
        })?,
    )?;
    t.set(
        "rol",
        lib_fn(lua, |_, a| shift(a, "rol", u32::rotate_left))?,
    )?;
    t.set(
        "ror",
        lib_fn(lua, |_, a| shift(a, "ror", u32::rotate_right))?,
    )?;
    t.set("tohex", lib_fn(lua, tohex)?)?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::libs::test_util::{call, text};

    #[test]
    fn luabitop_results() {
        let lua = Lua::new();
        let t = create(&lua).unwrap();
        let one = |name: &str, args: &str| text(&call(&lua, &t, name, args).unwrap()[0]);
        assert_eq!(one("tobit", "0xffffffff"), b"-1");
        assert_eq!(one("tobit", "2.5"), b"2");
        assert_eq!(one("tobit", "3.5"), b"4");
        assert_eq!(one("band", "0xff, 0x0f, 0x3"), b"3");
        assert_eq!(one("lshift", "1, 31"), b"-2147483648");
        assert_eq!(one("rshift", "-1, 28"), b"15");
        assert_eq!(one("arshift", "-256, 4"), b"-16");
        assert_eq!(one("rol", "0x12345678, 8"), b"878082066");
        assert_eq!(one("bswap", "0x12345678"), b"2018915346");
        assert_eq!(one("tohex", "255"), b"000000ff");
        assert_eq!(one("tohex", "255, -2"), b"FF");
        assert_eq!(
            call(&lua, &t, "band", "'x'").unwrap_err(),
            "bad argument #1 to 'band' (number expected, got string)"
        );
    }
}
