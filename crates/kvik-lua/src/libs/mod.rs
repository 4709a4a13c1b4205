//! The libraries Redis loads into its Lua state, written in Rust with Lua's C-library
//! behaviour: `bit` (LuaBitOp), `struct`, `cjson` and `cmsgpack`.

use mlua::{Lua, Table};

pub mod bit;
pub mod cjson;
pub mod cmsgpack;
pub mod structlib;

/// Adds each library's raw table to `libs` (the sandbox wraps and protects them).
pub(crate) fn install(lua: &Lua, libs: &Table) -> mlua::Result<()> {
    libs.set("bit", bit::create(lua)?)?;
    libs.set("struct", structlib::create(lua)?)?;
    libs.set("cjson", cjson::create(lua)?)?;
    libs.set("cmsgpack", cmsgpack::create(lua)?)?;
    Ok(())
}

#[cfg(test)]
pub(crate) mod test_util {
    use mlua::{Lua, Value};

    /// Calls `lib.name(args...)` of a raw library table built by `create`, returning the
    /// results or the raised value as text.
    pub fn call(
        lua: &Lua,
        lib: &mlua::Table,
        name: &str,
        code_args: &str,
    ) -> Result<Vec<Value>, String> {
        let f: mlua::Function = lib.get(name).unwrap();
        let args: mlua::MultiValue = lua.load(format!("return {code_args}")).eval().unwrap();
        match f.call::<mlua::MultiValue>(args) {
            Ok(v) => Ok(v.into_vec()),
            Err(e) => {
                let v = crate::args::take_raised(lua, Value::Error(Box::new(e)));
                Err(match v {
                    Value::String(s) => s.to_string_lossy(),
                    other => format!("{other:?}"),
                })
            }
        }
    }

    pub fn text(v: &Value) -> Vec<u8> {
        match v {
            Value::String(s) => s.as_bytes().to_vec(),
            Value::Number(n) => crate::numfmt::lua_number_text(*n).into_bytes(),
            Value::Integer(i) => crate::numfmt::lua_number_text(*i as f64).into_bytes(),
            other => format!("{other:?}").into_bytes(),
        }
    }
}
