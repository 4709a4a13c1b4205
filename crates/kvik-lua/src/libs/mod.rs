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
