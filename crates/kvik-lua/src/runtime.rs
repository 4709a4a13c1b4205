//! [`LuaRuntime`]: one sandboxed Lua 5.1 state with Redis's libraries, and the run of one
//! script or function on it against a [`Host`].
//!
//! The state is built once (`sandbox.lua` installs the libraries and the protections) and then
//! only runs compiled chunks. A run binds the host for its duration (`K.host`, created in an
//! mlua scope so it cannot outlive the borrow), publishes itself in [`ScriptControl`], and
//! writes the result or the error into the caller's RESP buffer.

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kvik_resp::{encode, Frame, Proto};
use mlua::{Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState};

use crate::args::{check_number, lib_fn, raise_value, take_raised, LibResult, Raise};
use crate::control::ScriptControl;
use crate::convert::{error_table, frame_to_lua, write_reply};
use crate::errors;
use crate::host::Host;
use crate::numfmt::c_double_to_i32;
use crate::redis_lib;

/// Redis checks for timeouts and kills every this many VM instructions.
const HOOK_EVERY: u32 = 100_000;

/// Per-run state the library functions reach through the Lua state's app data.
pub(crate) struct RunState {
    /// `redis.setresp`: the protocol of command replies and of booleans in the result.
    pub resp: u8,
    pub control: Arc<ScriptControl>,
    /// Set while FUNCTION LOAD runs a library's body: its deadline.
    pub load_deadline: Option<Instant>,
}

/// Redis's `rand48` generator behind `math.random` (`redisLrand48`), 48-bit state.
pub(crate) struct Rand48(Cell<u64>);

impl Rand48 {
    const A: u64 = 0x5_DEEC_E66D;
    const MASK: u64 = (1 << 48) - 1;

    fn seed(&self, seed: i32) {
        self.0.set((u64::from(seed as u32) << 16) | 0x330E);
    }

    fn next(&self) -> i32 {
        let x = (Self::A.wrapping_mul(self.0.get()).wrapping_add(0xB)) & Self::MASK;
        self.0.set(x);
        (x >> 17) as i32
    }
}

/// Which library set a runtime carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// EVAL scripts: `KEYS` and `ARGV` globals.
    Eval,
    /// FUNCTION libraries: `redis.register_function`, keys and args as parameters.
    Functions,
}

/// What is being run, for the run itself and its error texts.
pub(crate) struct Invocation<'a> {
    /// The name errors cite (`script: <name>`): the SHA for EVAL, the function name for FCALL.
    pub name: &'a str,
    pub keys: &'a [&'a [u8]],
    pub args: &'a [&'a [u8]],
}

/// A sandboxed Lua state.
pub struct LuaRuntime {
    lua: Lua,
    kind: Kind,
    /// Internal table shared with `sandbox.lua` (never reachable from scripts).
    k: Table,
    /// The real globals behind the read-only proxy scripts see.
    globals: Table,
    run_fn: Function,
    no_host: Function,
}

impl std::fmt::Debug for LuaRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LuaRuntime")
            .field("kind", &self.kind)
            .finish()
    }
}

fn math_random(lua: &Lua, args: &[Value]) -> LibResult {
    let rng = lua.app_data_ref::<Rand48>().expect("rand48 installed");
    let r = f64::from(rng.next() % i32::MAX) / f64::from(i32::MAX);
    drop(rng);
    let v = match args.len() {
        0 => r,
        1 => {
            let u = c_double_to_i32(check_number(args, 0, "random")?);
            if u < 1 {
                return Err(crate::args::arg_error(1, "random", "interval is empty"));
            }
            (r * f64::from(u)).floor() + 1.0
        }
        2 => {
            let l = c_double_to_i32(check_number(args, 0, "random")?);
            let u = c_double_to_i32(check_number(args, 1, "random")?);
            if l > u {
                return Err(crate::args::arg_error(2, "random", "interval is empty"));
            }
            (r * (f64::from(u) - f64::from(l) + 1.0)).floor() + f64::from(l)
        }
        _ => return Err(Raise::Msg("wrong number of arguments".into())),
    };
    Ok(MultiValue::from_vec(vec![Value::Number(v)]))
}

fn math_randomseed(lua: &Lua, args: &[Value]) -> LibResult {
    let seed = c_double_to_i32(check_number(args, 0, "randomseed")?);
    lua.app_data_ref::<Rand48>()
        .expect("rand48 installed")
        .seed(seed);
    Ok(MultiValue::new())
}

impl LuaRuntime {
    pub(crate) fn new(kind: Kind) -> mlua::Result<LuaRuntime> {
        let libs = StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::DEBUG;
        // SAFETY: the debug library is only loaded so `sandbox.lua` can capture it for the
        // error handler; it removes `debug` from the globals before any script is compiled.
        let lua = unsafe { Lua::unsafe_new_with(libs, LuaOptions::default()) };
        // rand48's state before any seeding ({0x330E, 0xABCD, 0x1234}), where Redis starts.
        let rng = Rand48(Cell::new(0x1234_ABCD_330E));
        lua.set_app_data(rng);
        let k = lua.create_table()?;
        let libs = lua.create_table()?;
        let redis = redis_lib::create(&lua)?;
        for (name, op) in [
            ("call", "call"),
            ("pcall", "pcall"),
            ("log", "log"),
            ("acl_check_cmd", "acl"),
        ] {
            let k = k.clone();
            redis.set(
                name,
                lua.create_function(move |lua, args: MultiValue| host_dispatch(lua, &k, op, args))?,
            )?;
        }
        libs.set("redis", redis)?;
        crate::libs::install(&lua, &libs)?;
        k.set("libs", libs.clone())?;
        k.set("random", lib_fn(&lua, math_random)?)?;
        k.set("randomseed", lib_fn(&lua, math_randomseed)?)?;
        if kind == Kind::Functions {
            k.set(
                "register_function",
                lib_fn(&lua, crate::functions::register_function)?,
            )?;
        }
        k.set(
            "take_raised",
            lua.create_function(|lua, err: Value| Ok(take_raised(lua, err)))?,
        )?;
        k.set(
            "killed",
            lua.create_function(|lua, ()| {
                Ok(lua
                    .app_data_ref::<RunState>()
                    .is_some_and(|s| s.control.killed()))
            })?,
        )?;
        k.set(
            "kill_message",
            lua.create_function(|lua, ()| lua.create_string(errors::SCRIPT_KILLED))?,
        )?;
        let no_host = lua.create_function(|lua, _: MultiValue| {
            protocol(
                lua,
                Err(redis_lib::raise(
                    lua,
                    "This Redis command is not allowed from script",
                )),
            )
        })?;
        k.set("host", no_host.clone())?;
        let glue = lua
            .load(include_str!("sandbox.lua"))
            .set_name("=kvik_sandbox")
            .into_function()?;
        let globals: Table = glue.call(k.clone())?;
        let run_fn: Function = k.get("run")?;
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(HOOK_EVERY),
            |lua, _| {
                let Some(st) = lua.app_data_ref::<RunState>() else {
                    return Ok(VmState::Continue);
                };
                if st.load_deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(mlua::Error::runtime("FUNCTION LOAD timeout"));
                }
                if st.control.tick() {
                    return Err(mlua::Error::runtime("killed"));
                }
                Ok(VmState::Continue)
            },
        );
        Ok(LuaRuntime {
            lua,
            kind,
            k,
            globals,
            run_fn,
            no_host,
        })
    }

    pub(crate) fn lua(&self) -> &Lua {
        &self.lua
    }

    /// Compiles `code` as a chunk named `chunk_name` (`@user_script`, `@user_function`).
    /// `Err` is Lua's message (`user_script:1: unexpected symbol near ...`).
    pub(crate) fn compile(&self, chunk_name: &str, code: &[u8]) -> Result<Function, String> {
        self.lua
            .load(code)
            .set_name(chunk_name)
            .into_function()
            .map_err(|e| match e {
                mlua::Error::SyntaxError { message, .. } => message,
                other => other.to_string(),
            })
    }

    fn array(&self, items: &[&[u8]]) -> mlua::Result<Table> {
        let t = self.lua.create_table_with_capacity(items.len(), 0)?;
        for (i, s) in items.iter().enumerate() {
            t.raw_set(i + 1, self.lua.create_string(s)?)?;
        }
        Ok(t)
    }

    /// Runs a compiled body or a library's load chunk with nothing bound to `redis.call`,
    /// under a deadline; used by FUNCTION LOAD. `Err` is the error text (no `ERR ` prefix).
    pub(crate) fn run_loader(&self, f: &Function, timeout: Duration) -> Result<(), String> {
        self.lua.set_app_data(RunState {
            resp: 2,
            control: Arc::new(ScriptControl::default()),
            load_deadline: Some(Instant::now() + timeout),
        });
        let loading: Function = self.k.get("loading").expect("functions runtime");
        let _ = loading.call::<()>(true);
        let r = self.run_fn.call::<MultiValue>(f.clone());
        let _ = loading.call::<()>(false);
        let timed_out = self
            .lua
            .remove_app_data::<RunState>()
            .and_then(|s| s.load_deadline)
            .is_some_and(|d| Instant::now() >= d);
        match r {
            Ok(vals) => {
                let mut it = vals.into_iter();
                if matches!(it.next(), Some(Value::Boolean(true))) {
                    return Ok(());
                }
                if timed_out {
                    return Err("FUNCTION LOAD timeout".into());
                }
                let err = match it.next() {
                    Some(Value::Table(t)) => t.raw_get::<Option<String>>("err").ok().flatten(),
                    _ => None,
                };
                Err(err.unwrap_or_else(|| "ERR unknown error".into()))
            }
            Err(e) => Err(format!("ERR {e}")),
        }
    }

    /// Runs `f` for `inv` against `host`, writing the reply for a client speaking `proto`.
    /// EVAL scripts get `KEYS`/`ARGV` globals and a freshly seeded `math.random`; functions get
    /// `(keys, args)` parameters.
    pub(crate) fn run(
        &self,
        f: &Function,
        inv: &Invocation<'_>,
        host: &mut dyn Host,
        control: &Arc<ScriptControl>,
        proto: Proto,
        out: &mut Vec<u8>,
    ) {
        let is_eval = self.kind == Kind::Eval;
        control.begin(is_eval);
        self.lua.set_app_data(RunState {
            resp: 2,
            control: control.clone(),
            load_deadline: None,
        });
        let result = self.run_bound(f, inv, host, control, is_eval, proto, out);
        let _ = self.k.raw_set("host", self.no_host.clone());
        self.lua.remove_app_data::<RunState>();
        control.end();
        if let Err(e) = result {
            let msg = format!("ERR Error running script {}, {}", inv.name, e);
            encode::error(out, msg.as_bytes());
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn run_bound(
        &self,
        f: &Function,
        inv: &Invocation<'_>,
        host: &mut dyn Host,
        control: &Arc<ScriptControl>,
        is_eval: bool,
        proto: Proto,
        out: &mut Vec<u8>,
    ) -> mlua::Result<()> {
        let keys = self.array(inv.keys)?;
        let args = self.array(inv.args)?;
        if is_eval {
            self.globals.raw_set("KEYS", keys.clone())?;
            self.globals.raw_set("ARGV", args.clone())?;
        }
        let rets = self.lua.scope(|scope| {
            let bound = scope.create_function_mut(|lua, args: MultiValue| {
                protocol(lua, host_request(lua, &mut *host, control, args))
            })?;
            self.k.raw_set("host", bound)?;
            if is_eval {
                self.run_fn.call::<MultiValue>(f.clone())
            } else {
                self.run_fn.call::<MultiValue>((f.clone(), keys, args))
            }
        })?;
        let resp = self.lua.app_data_ref::<RunState>().map_or(2, |s| s.resp);
        let mut it = rets.into_iter();
        let ok = matches!(it.next(), Some(Value::Boolean(true)));
        let v = it.next().unwrap_or(Value::Nil);
        if ok {
            write_reply(out, &v, resp, proto);
        } else {
            write_script_error(out, &v, inv.name);
        }
        Ok(())
    }
}

/// `(true, values...)` or `(false, error)`: how the per-run host function answers
/// [`host_dispatch`] (raising inside a nested callback would lose the value).
fn protocol(lua: &Lua, r: LibResult) -> mlua::Result<MultiValue> {
    match r {
        Ok(mut vals) => {
            vals.push_front(Value::Boolean(true));
            Ok(vals)
        }
        Err(Raise::Msg(m)) => Ok(MultiValue::from_vec(vec![
            Value::Boolean(false),
            Value::String(lua.create_string(m)?),
        ])),
        Err(Raise::Value(v)) => Ok(MultiValue::from_vec(vec![Value::Boolean(false), v])),
        Err(Raise::Lua(e)) => Err(e),
    }
}

/// `redis.call` / `pcall` / `log` / `acl_check_cmd`: forwards to the host bound for this run
/// (`K.host`) and raises what it reports.
fn host_dispatch(lua: &Lua, k: &Table, op: &str, args: MultiValue) -> mlua::Result<MultiValue> {
    let host: Function = k.raw_get("host")?;
    let mut args = args;
    args.push_front(Value::String(lua.create_string(op)?));
    let mut r = host.call::<MultiValue>(args)?;
    match r.pop_front() {
        Some(Value::Boolean(true)) => Ok(r),
        _ => Err(raise_value(lua, r.pop_front().unwrap_or(Value::Nil))),
    }
}

/// Everything a script asks of the host: `K.host(op, ...)` with op `call`, `pcall`, `log` or
/// `acl`.
fn host_request(
    lua: &Lua,
    host: &mut dyn Host,
    control: &ScriptControl,
    args: MultiValue,
) -> LibResult {
    let mut args = args.into_vec();
    let op = match args.first() {
        Some(Value::String(s)) => s.to_str()?.to_string(),
        _ => String::new(),
    };
    args.remove(0);
    match op.as_str() {
        "call" | "pcall" => {
            let raise = op == "call";
            let argv = match redis_lib::command_args(&args) {
                Ok(a) => a,
                Err(msg) => {
                    let t = Value::Table(error_table(lua, msg.as_bytes())?);
                    return if raise {
                        Err(Raise::Value(t))
                    } else {
                        Ok(MultiValue::from_vec(vec![t]))
                    };
                }
            };
            let refs: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
            let resp = lua.app_data_ref::<RunState>().map_or(2, |s| s.resp);
            let reply = host.call(&refs, resp);
            if reply.wrote {
                control.mark_written();
            }
            let is_err = matches!(reply.frame, Frame::Error(_) | Frame::BlobError(_));
            let v = frame_to_lua(lua, &reply.frame, resp)?;
            if is_err && raise {
                Err(Raise::Value(v))
            } else {
                Ok(MultiValue::from_vec(vec![v]))
            }
        }
        "log" => {
            let (level, msg) = redis_lib::parse_log(lua, &args)?;
            host.log(level, &msg);
            Ok(MultiValue::new())
        }
        _ => {
            let argv = redis_lib::command_args(&args).map_err(|m| redis_lib::raise(lua, m))?;
            let refs: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
            match host.acl_check_cmd(&refs) {
                Ok(b) => Ok(MultiValue::from_vec(vec![Value::Boolean(b)])),
                Err(e) => Err(Raise::Value(Value::Table(error_table(lua, e.as_bytes())?))),
            }
        }
    }
}

/// Redis's reply for a script that raised: `-<err> script: <name>, on <source>:<line>.`
fn write_script_error(out: &mut Vec<u8>, v: &Value, name: &str) {
    let Value::Table(t) = v else {
        let msg = format!("ERR Error running script {name}, execution failure");
        encode::error(out, msg.as_bytes());
        return;
    };
    let mut text = match t.raw_get::<Value>("err") {
        Ok(Value::String(s)) => s.as_bytes().to_vec(),
        Ok(Value::Number(n)) => crate::numfmt::lua_number_text(n).into_bytes(),
        _ => Vec::new(),
    };
    let source = match t.raw_get::<Value>("source") {
        Ok(Value::String(s)) => Some(s.as_bytes().to_vec()),
        _ => None,
    };
    let line = match t.raw_get::<Value>("line") {
        Ok(Value::Number(n)) => Some(crate::numfmt::lua_number_text(n)),
        Ok(Value::Integer(n)) => Some(n.to_string()),
        _ => None,
    };
    if let (Some(source), Some(line)) = (source, line) {
        text.extend_from_slice(format!(" script: {name}, on ").as_bytes());
        text.extend_from_slice(&source);
        text.extend_from_slice(format!(":{line}.").as_bytes());
    }
    encode::error(out, &text);
}
