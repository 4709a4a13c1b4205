//! [`FunctionEngine`]: Redis 7 functions. FUNCTION LOAD runs a library's body once (it calls
//! `redis.register_function`), the registry maps function names to their callbacks, and FCALL
//! runs one. LIST / DELETE / FLUSH / DUMP / RESTORE / STATS work on the registry; DUMP's
//! payload is kvik's own (versioned, checksummed) list of library codes, which is also what
//! the server persists so functions survive a restart.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use kvik_resp::{encode, Frame};
use mlua::{Function, Lua, MultiValue, Value};

use crate::args::{LibResult, Raise};
use crate::errors;
use crate::flags::{is_valid_name, parse_library_metadata, ScriptFlags};
use crate::host::RunContext;
use crate::redis_lib::raise;
use crate::runtime::{Invocation, Kind, LuaRuntime};
use crate::script::split_keys_args;

/// How long a library's body may run during FUNCTION LOAD (Redis: 500 ms).
pub const LOAD_TIMEOUT: Duration = Duration::from_millis(500);

const DUMP_MAGIC: &[u8; 4] = b"KVFN";
const DUMP_VERSION: u8 = 1;

/// What a function declared when it was registered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionInfo {
    /// Its name (FCALL's first argument).
    pub name: String,
    /// `description`, if given.
    pub description: Option<String>,
    /// `flags`.
    pub flags: ScriptFlags,
}

#[derive(Clone)]
struct Registered {
    info: FunctionInfo,
    callback: Function,
}

/// A loaded library.
#[derive(Clone)]
struct Library {
    code: Vec<u8>,
    functions: BTreeMap<String, Registered>,
}

/// Registrations collected while a library's body runs (app data of the Lua state).
struct Registrations(Vec<Registered>);

/// The function FUNCTION STATS reports as running (the server knows it from its
/// [`ScriptControl`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunningScript {
    /// The function's name.
    pub name: String,
    /// The FCALL command that started it, arguments included.
    pub command: Vec<Vec<u8>>,
    /// How long it has run.
    pub duration_ms: i64,
}

/// How FUNCTION RESTORE treats libraries that already exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RestorePolicy {
    /// Refuse when a restored library exists (the default).
    #[default]
    Append,
    /// Replace existing libraries of the same name.
    Replace,
    /// Drop every library first.
    Flush,
}

/// The functions engine: one Lua state holding every library.
pub struct FunctionEngine {
    rt: LuaRuntime,
    libs: BTreeMap<String, Library>,
    /// Function name, lower-cased (Redis looks functions up case-insensitively) -> (library,
    /// function name as registered).
    index: HashMap<String, (String, String)>,
}

impl std::fmt::Debug for FunctionEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FunctionEngine")
            .field("libraries", &self.libs.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Default for FunctionEngine {
    fn default() -> Self {
        FunctionEngine::new()
    }
}

fn named_error(lua: &Lua, msg: &str) -> Raise {
    raise(lua, msg)
}

fn read_flags(lua: &Lua, v: &Value) -> Result<ScriptFlags, Raise> {
    let Value::Table(t) = v else {
        return Err(named_error(
            lua,
            "flags argument to redis.register_function must be a table representing function flags",
        ));
    };
    let mut flags = ScriptFlags::empty();
    for pair in t.clone().pairs::<Value, Value>() {
        let (_, f) = pair?;
        let f = match f {
            Value::String(s) => ScriptFlags::from_name(&s.as_bytes()),
            _ => None,
        };
        flags |= f.ok_or_else(|| named_error(lua, "unknown flag given"))?;
    }
    Ok(flags)
}

/// `redis.register_function(name, callback)` or `redis.register_function{function_name=...,
/// callback=..., flags=..., description=...}`, only while FUNCTION LOAD runs.
pub(crate) fn register_function(lua: &Lua, args: &[Value]) -> LibResult {
    if lua.app_data_ref::<Registrations>().is_none() {
        return Err(named_error(
            lua,
            "redis.register_function can only be called on FUNCTION LOAD command",
        ));
    }
    let (name, callback, flags, description) = match args {
        [Value::Table(t)] => {
            let mut name = None;
            let mut callback = None;
            let mut flags = ScriptFlags::empty();
            let mut description = None;
            for pair in t.clone().pairs::<Value, Value>() {
                let (k, v) = pair?;
                let key = match &k {
                    Value::String(s) => s.to_string_lossy(),
                    _ => {
                        return Err(named_error(
                            lua,
                            "named argument key given to redis.register_function is not a string",
                        ))
                    }
                };
                match (key.as_str(), v) {
                    ("function_name", Value::String(s)) => name = Some(s.to_string_lossy()),
                    ("function_name", _) => {
                        return Err(named_error(
                            lua,
                            "function_name argument given to redis.register_function must be a string",
                        ))
                    }
                    ("description", Value::String(s)) => description = Some(s.to_string_lossy()),
                    ("description", _) => {
                        return Err(named_error(
                            lua,
                            "description argument given to redis.register_function must be a string",
                        ))
                    }
                    ("callback", Value::Function(f)) => callback = Some(f),
                    ("callback", _) => {
                        return Err(named_error(
                            lua,
                            "callback argument given to redis.register_function must be a function",
                        ))
                    }
                    ("flags", v) => flags = read_flags(lua, &v)?,
                    _ => {
                        return Err(named_error(
                            lua,
                            "unknown argument given to redis.register_function",
                        ))
                    }
                }
            }
            let name = name.ok_or_else(|| {
                named_error(lua, "redis.register_function must get a function name argument")
            })?;
            let callback = callback.ok_or_else(|| {
                named_error(lua, "redis.register_function must get a callback argument")
            })?;
            (name, callback, flags, description)
        }
        [name, callback] => {
            let Value::String(name) = name else {
                return Err(named_error(
                    lua,
                    "first argument to redis.register_function must be a string",
                ));
            };
            let Value::Function(callback) = callback else {
                return Err(named_error(
                    lua,
                    "second argument to redis.register_function must be a function",
                ));
            };
            (name.to_string_lossy(), callback.clone(), ScriptFlags::empty(), None)
        }
        [_] => {
            return Err(named_error(
                lua,
                "calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).",
            ))
        }
        _ => {
            return Err(named_error(
                lua,
                "wrong number of arguments to redis.register_function",
            ))
        }
    };
    if !is_valid_name(name.as_bytes()) {
        // Redis 7.0 words this error as for library names.
        return Err(named_error(lua, "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"));
    }
    let mut reg = lua.app_data_mut::<Registrations>().expect("checked above");
    if reg.0.iter().any(|r| r.info.name == name) {
        return Err(named_error(lua, "Function already exists in the library"));
    }
    reg.0.push(Registered {
        info: FunctionInfo {
            name,
            description,
            flags,
        },
        callback,
    });
    Ok(MultiValue::new())
}

fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl FunctionEngine {
    /// An engine with no library.
    pub fn new() -> FunctionEngine {
        FunctionEngine {
            rt: LuaRuntime::new(Kind::Functions).expect("the Lua sandbox builds"),
            libs: BTreeMap::new(),
            index: HashMap::new(),
        }
    }

    /// Compiles and runs a library's code, returning its name and functions.
    fn build(&self, code: &[u8]) -> Result<(String, Library), String> {
        let (engine, name, meta_len) = parse_library_metadata(code)?;
        if !engine.eq_ignore_ascii_case("lua") {
            return Err(format!("ERR Engine '{engine}' not found"));
        }
        if !is_valid_name(name.as_bytes()) {
            return Err("ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
        }
        let body = self
            .rt
            .compile("@user_function", &code[meta_len..])
            .map_err(|e| format!("ERR Error compiling function: {e}"))?;
        let lua = self.rt.lua();
        lua.set_app_data(Registrations(Vec::new()));
        let ran = self.rt.run_loader(&body, LOAD_TIMEOUT);
        let regs = lua
            .remove_app_data::<Registrations>()
            .map(|r| r.0)
            .unwrap_or_default();
        if let Err(e) = ran {
            return Err(format!("ERR Error registering functions: {e}"));
        }
        if regs.is_empty() {
            return Err("ERR No functions registered".into());
        }
        let functions = regs.into_iter().map(|r| (r.info.name.clone(), r)).collect();
        Ok((
            name,
            Library {
                code: code.to_vec(),
                functions,
            },
        ))
    }

    /// Adds `new` libraries to `libs` (after the policy removed what it replaces), checking
    /// name collisions; returns the new index.
    fn join(
        libs: &mut BTreeMap<String, Library>,
        new: Vec<(String, Library)>,
        replace: bool,
    ) -> Result<HashMap<String, (String, String)>, String> {
        for (name, _) in &new {
            if libs.contains_key(name) {
                if replace {
                    libs.remove(name);
                } else {
                    return Err(format!("ERR Library '{name}' already exists"));
                }
            }
        }
        let mut index: HashMap<String, (String, String)> = libs
            .iter()
            .flat_map(|(l, lib)| {
                lib.functions
                    .keys()
                    .map(move |f| (f.to_lowercase(), (l.clone(), f.clone())))
            })
            .collect();
        for (name, lib) in new {
            // Only other libraries collide: Redis lets one library hold `f` and `F`.
            if let Some(f) = lib
                .functions
                .keys()
                .find(|f| index.contains_key(&f.to_lowercase()))
            {
                return Err(format!("ERR Function {f} already exists"));
            }
            for f in lib.functions.keys() {
                index.insert(f.to_lowercase(), (name.clone(), f.clone()));
            }
            libs.insert(name, lib);
        }
        Ok(index)
    }

    /// FUNCTION LOAD [REPLACE] code: the library's name, or Redis's error.
    pub fn load(&mut self, code: &[u8], replace: bool) -> Result<String, String> {
        let (engine, name, _) = parse_library_metadata(code)?;
        if !replace && self.libs.contains_key(&name) && engine.eq_ignore_ascii_case("lua") {
            return Err(format!("ERR Library '{name}' already exists"));
        }
        let built = self.build(code)?;
        let mut libs = self.libs.clone();
        let index = Self::join(&mut libs, vec![built], replace)?;
        self.libs = libs;
        self.index = index;
        Ok(name)
    }

    /// FUNCTION DELETE name.
    pub fn delete(&mut self, name: &str) -> Result<(), &'static str> {
        let lib = self.libs.remove(name).ok_or(errors::LIBRARY_NOT_FOUND)?;
        for f in lib.functions.keys() {
            self.index.remove(&f.to_lowercase());
        }
        Ok(())
    }

    /// FUNCTION FLUSH: drops every library and starts a new Lua state.
    pub fn flush(&mut self) {
        self.libs.clear();
        self.index.clear();
        self.rt = LuaRuntime::new(Kind::Functions).expect("the Lua sandbox builds");
    }

    /// FUNCTION STATS' engine counts: (libraries, functions).
    pub fn counts(&self) -> (usize, usize) {
        (self.libs.len(), self.index.len())
    }

    /// FUNCTION STATS, as a frame the caller encodes for its client's protocol.
    pub fn stats(&self, running: Option<&RunningScript>) -> Frame {
        let bulk = |s: &str| Frame::Bulk(s.as_bytes().to_vec());
        let running = running.map_or(Frame::Null, |r| {
            Frame::Map(vec![
                (bulk("name"), bulk(&r.name)),
                (
                    bulk("command"),
                    Frame::Array(r.command.iter().map(|a| Frame::Bulk(a.clone())).collect()),
                ),
                (bulk("duration_ms"), Frame::Integer(r.duration_ms)),
            ])
        });
        let (libraries, functions) = self.counts();
        Frame::Map(vec![
            (bulk("running_script"), running),
            (
                bulk("engines"),
                Frame::Map(vec![(
                    bulk("LUA"),
                    Frame::Map(vec![
                        (bulk("libraries_count"), Frame::Integer(libraries as i64)),
                        (bulk("functions_count"), Frame::Integer(functions as i64)),
                    ]),
                )]),
            ),
        ])
    }

    /// The declaration of function `name` (the server checks its flags before FCALL runs it:
    /// FCALL_RO needs `no-writes`).
    pub fn function(&self, name: &str) -> Option<&FunctionInfo> {
        let (lib, f) = self.index.get(&name.to_lowercase())?;
        self.libs.get(lib)?.functions.get(f).map(|r| &r.info)
    }

    /// The names of the loaded libraries, sorted.
    pub fn library_names(&self) -> Vec<&str> {
        self.libs.keys().map(String::as_str).collect()
    }

    /// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE], as a frame the caller encodes for its
    /// client's protocol.
    pub fn list(&self, pattern: Option<&[u8]>, with_code: bool) -> Frame {
        let bulk = |s: &str| Frame::Bulk(s.as_bytes().to_vec());
        let libs = self
            .libs
            .iter()
            .filter(|(name, _)| {
                pattern.is_none_or(|p| kvik_types::glob::matches_nocase(p, name.as_bytes()))
            })
            .map(|(name, lib)| {
                let functions = lib
                    .functions
                    .values()
                    .map(|r| {
                        Frame::Map(vec![
                            (bulk("name"), bulk(&r.info.name)),
                            (
                                bulk("description"),
                                r.info.description.as_deref().map_or(Frame::Null, bulk),
                            ),
                            (
                                bulk("flags"),
                                Frame::Set(
                                    r.info
                                        .flags
                                        .names()
                                        .into_iter()
                                        .map(|f| Frame::Simple(f.into()))
                                        .collect(),
                                ),
                            ),
                        ])
                    })
                    .collect();
                let mut pairs = vec![
                    (bulk("library_name"), bulk(name)),
                    (bulk("engine"), bulk("LUA")),
                    (bulk("functions"), Frame::Array(functions)),
                ];
                if with_code {
                    pairs.push((bulk("library_code"), Frame::Bulk(lib.code.clone())));
                }
                Frame::Map(pairs)
            })
            .collect();
        Frame::Array(libs)
    }

    /// FUNCTION DUMP: every library's code in kvik's payload format.
    pub fn dump(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(DUMP_MAGIC);
        out.push(DUMP_VERSION);
        out.extend_from_slice(&(self.libs.len() as u32).to_le_bytes());
        for lib in self.libs.values() {
            out.extend_from_slice(&(lib.code.len() as u32).to_le_bytes());
            out.extend_from_slice(&lib.code);
        }
        let sum = fnv1a(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        out
    }

    fn parse_dump(payload: &[u8]) -> Option<Vec<&[u8]>> {
        let (body, sum) = payload.split_at_checked(payload.len().checked_sub(8)?)?;
        if fnv1a(body).to_le_bytes() != sum {
            return None;
        }
        let rest = body.strip_prefix(DUMP_MAGIC)?;
        let (&version, rest) = rest.split_first()?;
        if version != DUMP_VERSION {
            return None;
        }
        let (n, mut rest) = rest.split_at_checked(4)?;
        let n = u32::from_le_bytes(n.try_into().ok()?);
        let mut codes = Vec::new();
        for _ in 0..n {
            let (len, r) = rest.split_at_checked(4)?;
            let len = u32::from_le_bytes(len.try_into().ok()?) as usize;
            let (code, r) = r.split_at_checked(len)?;
            codes.push(code);
            rest = r;
        }
        rest.is_empty().then_some(codes)
    }

    /// FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE].
    pub fn restore(&mut self, payload: &[u8], policy: RestorePolicy) -> Result<(), String> {
        let codes = Self::parse_dump(payload).ok_or(errors::BAD_PAYLOAD)?;
        let mut built = Vec::with_capacity(codes.len());
        for code in codes {
            built.push(self.build(code)?);
        }
        let mut libs = if policy == RestorePolicy::Flush {
            BTreeMap::new()
        } else {
            self.libs.clone()
        };
        let index = Self::join(&mut libs, built, policy == RestorePolicy::Replace)?;
        self.libs = libs;
        self.index = index;
        Ok(())
    }

    /// Runs function `name` with `keys` and `args` (the server has checked flags and keys).
    pub fn run(&mut self, name: &str, keys: &[&[u8]], args: &[&[u8]], ctx: &mut RunContext<'_>) {
        let Some(found) = self
            .index
            .get(&name.to_lowercase())
            .and_then(|(l, f)| self.libs.get(l)?.functions.get(f))
        else {
            encode::error(ctx.out, errors::FUNCTION_NOT_FOUND.as_bytes());
            return;
        };
        let callback = found.callback.clone();
        let name = found.info.name.clone();
        let inv = Invocation {
            name: &name,
            keys,
            args,
        };
        self.rt.run(&callback, &inv, ctx);
    }

    /// The whole of `FCALL function numkeys key... arg...` (`argv` without the command name).
    pub fn fcall(&mut self, argv: &[&[u8]], ctx: &mut RunContext<'_>) {
        let Some((name, rest)) = argv.split_first() else {
            encode::error(
                ctx.out,
                b"ERR wrong number of arguments for 'fcall' command",
            );
            return;
        };
        let name = String::from_utf8_lossy(name);
        if self.function(&name).is_none() {
            return encode::error(ctx.out, errors::FUNCTION_NOT_FOUND.as_bytes());
        }
        match split_keys_args(rest) {
            Ok((keys, args)) => self.run(&name, keys, args, ctx),
            // FCALL words a non-integer count its own way.
            Err(errors::NOT_AN_INTEGER) => encode::error(ctx.out, errors::BAD_NUMKEYS.as_bytes()),
            Err(e) => encode::error(ctx.out, e.as_bytes()),
        }
    }
}
