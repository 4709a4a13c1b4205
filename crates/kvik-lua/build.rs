//! Builds Lua 5.1 from source (the `lua-src` crate) and links it into kvik-lua.
//!
//! mlua's `vendored` feature would do the same, but it also pulls LuaJIT's build dependencies,
//! which change the features of crates RocksDB's build script depends on: every warm target
//! directory would then rebuild RocksDB's C++ once. Compiling Lua here needs only `cc`, which
//! RocksDB already uses with the same features.

fn main() {
    let artifacts = lua_src::Build::new().build(lua_src::Lua51);
    println!(
        "cargo:rustc-link-search=native={}",
        artifacts.lib_dir().display()
    );
    for lib in artifacts.libs() {
        // Whole archive: mlua-sys, linked after this crate, is the one that uses the symbols.
        println!("cargo:rustc-link-lib=static:+whole-archive={lib}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
