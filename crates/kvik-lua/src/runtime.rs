//! [`LuaRuntime`]: one sandboxed Lua 5.1 state with Redis's libraries, and the run of one
//! script or function on it against a [`Host`].
//!
//! The state is built once (`sandbox.lua` installs the libraries and the protections) and then
//! only runs compiled chunks. A run binds the host for its duration (`K.host`, created in an
//! mlua scope so it cannot outlive the borrow), publishes itself in [`ScriptControl`], and
//! writes the result or the error into the caller's RESP buffer.

use std::cell::{Cell, RefCell};
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kvik_resp::{encode, Frame, Proto};
use mlua::{Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState};

use crate::args::{check_number, finish, lib_fn, take_raised, LibResult, Raise};
use crate::control::ScriptControl;
use crate::convert::{error_table, frame_to_lua, write_reply};
use crate::errors;
use crate::host::{Host, RunContext};
use crate::numfmt::c_double_to_i32;
use crate::redis_lib;

/// Redis checks for timeouts and kills every this many VM instructions.
const HOOK_EVERY: u32 = 100_000;

/// Per-run state the library functions reach through the Lua state's app data (installed
/// once; each run fills and clears it).
pub(crate) struct RunState {
    /// `redis.setresp`: the protocol of command replies and of booleans in the result.
    pub resp: Cell<u8>,
    control: RefCell<Option<Arc<ScriptControl>>>,
    /// Set while FUNCTION LOAD runs a library's body: its deadline.
    load_deadline: Cell<Option<Instant>>,
    /// The host of the current run (see [`LuaRuntime::run`] for why a pointer).
    host: Cell<Option<NonNull<dyn Host>>>,
}

impl RunState {
    fn control(&self) -> Option<Arc<ScriptControl>> {
        self.control.borrow().clone()
    }

    fn killed(&self) -> bool {
        self.control.borrow().as_ref().is_some_and(|c| c.killed())
    }

    /// Whether the interrupt hook must stop the script (kill, or FUNCTION LOAD's deadline).
    fn must_stop(&self) -> Option<&'static str> {
        if self
            .load_deadline
            .get()
            .is_some_and(|d| Instant::now() >= d)
        {
            return Some("FUNCTION LOAD timeout");
        }
        self.control
            .borrow()
            .as_ref()
            .is_some_and(|c| c.tick())
            .then_some("killed")
    }
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
    /// The names "KEYS" and "ARGV" as Lua strings, made once: EVAL binds both at every run.
    keys_name: mlua::String,
    argv_name: mlua::String,
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

/// Lua 5.1's `table.insert`, refusing the read-only tables (`K.real` maps their proxies):
/// the C original writes raw and would slip past the proxies.
fn table_insert(lua: &Lua, k: &Table, args: &[Value]) -> LibResult {
    let Some(Value::Table(t)) = args.first() else {
        let got = args.first().map_or("no value", crate::args::type_name);
        return Err(crate::args::arg_error(
            1,
            "insert",
            &format!("table expected, got {got}"),
        ));
    };
    let mut e = t.raw_len() as i64 + 1;
    let pos = match args.len() {
        2 => e,
        3 => {
            let pos = i64::from(c_double_to_i32(check_number(args, 1, "insert")?));
            e = e.max(pos);
            pos
        }
        _ => return Err(Raise::Msg("wrong number of arguments to 'insert'".into())),
    };
    let real: Table = k.raw_get("real")?;
    if !real.raw_get::<Value>(t.clone())?.is_nil() {
        let msg = lua.create_string("Attempt to modify a readonly table")?;
        return Err(Raise::Value(Value::String(msg)));
    }
    for i in (pos + 1..=e).rev() {
        t.raw_set(i, t.raw_get::<Value>(i - 1)?)?;
    }
    t.raw_set(pos, args[args.len() - 1].clone())?;
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
        lua.set_app_data(RunState {
            resp: Cell::new(2),
            control: RefCell::new(None),
            load_deadline: Cell::new(None),
            host: Cell::new(None),
        });
        let k = lua.create_table()?;
        let libs = lua.create_table()?;
        let redis = redis_lib::create(&lua)?;
        for (name, op) in [
            ("call", HostOp::Call),
            ("pcall", HostOp::Pcall),
            ("log", HostOp::Log),
            ("acl_check_cmd", HostOp::Acl),
        ] {
            redis.set(
                name,
                lua.create_function(move |lua, args: MultiValue| host_op(lua, op, args))?,
            )?;
        }
        libs.set("redis", redis)?;
        crate::libs::install(&lua, &libs)?;
        k.set("libs", libs.clone())?;
        k.set("random", lib_fn(&lua, math_random)?)?;
        let kk = k.clone();
        k.set(
            "table_insert",
            lib_fn(&lua, move |lua, args| table_insert(lua, &kk, args))?,
        )?;
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
                Ok(lua.app_data_ref::<RunState>().is_some_and(|s| s.killed()))
            })?,
        )?;
        k.set(
            "kill_message",
            lua.create_function(|lua, ()| lua.create_string(errors::SCRIPT_KILLED))?,
        )?;
        let glue = lua
            .load(include_str!("sandbox.lua"))
            .set_name("=kvik_sandbox")
            .into_function()?;
        let globals: Table = glue.call(k.clone())?;
        let run_fn: Function = k.get("run")?;
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(HOOK_EVERY),
            |lua, _| match lua.app_data_ref::<RunState>().and_then(|s| s.must_stop()) {
                Some(why) => Err(mlua::Error::runtime(why)),
                None => Ok(VmState::Continue),
            },
        );
        let keys_name = lua.create_string("KEYS")?;
        let argv_name = lua.create_string("ARGV")?;
        Ok(LuaRuntime {
            lua,
            kind,
            k,
            globals,
            run_fn,
            keys_name,
            argv_name,
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

    fn state(&self) -> mlua::AppDataRef<'_, RunState> {
        self.lua
            .app_data_ref::<RunState>()
            .expect("run state installed")
    }

    /// Runs a library's body with nothing bound to `redis.call`, under a deadline; used by
    /// FUNCTION LOAD. `Err` is the error text.
    pub(crate) fn run_loader(&self, f: &Function, timeout: Duration) -> Result<(), String> {
        {
            let st = self.state();
            st.resp.set(2);
            *st.control.borrow_mut() = Some(Arc::new(ScriptControl::default()));
            st.load_deadline.set(Some(Instant::now() + timeout));
        }
        let loading: Function = self.k.get("loading").expect("functions runtime");
        let _ = loading.call::<()>(true);
        let r = self.run_fn.call::<MultiValue>(f.clone());
        let _ = loading.call::<()>(false);
        let timed_out = {
            let st = self.state();
            *st.control.borrow_mut() = None;
            st.load_deadline.take().is_some_and(|d| Instant::now() >= d)
        };
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
    /// EVAL scripts get `KEYS`/`ARGV` globals; functions get `(keys, args)` parameters.
    ///
    /// The host is reached by `redis.call` through a pointer kept in the run state for the
    /// duration of this call: a scoped Lua function per run measured about twice the fixed
    /// cost of a small EVALSHA.
    pub(crate) fn run(&self, f: &Function, inv: &Invocation<'_>, ctx: &mut RunContext<'_>) {
        let RunContext {
            host,
            control,
            proto,
            out,
        } = ctx;
        let (control, proto): (&Arc<ScriptControl>, Proto) = (control, *proto);
        let is_eval = self.kind == Kind::Eval;
        control.begin(is_eval);
        let host: NonNull<dyn Host + '_> = NonNull::from(&mut **host);
        // SAFETY: only the lifetime is erased. The pointer comes from the `&mut dyn Host` this
        // function holds until it returns, and it is cleared below before returning; while it
        // is set, the only user is `host_op` on this (single-threaded) Lua state, which never
        // keeps the reference beyond one command and is never re-entered by the host.
        let host: NonNull<dyn Host> = unsafe { std::mem::transmute(host) };
        {
            let st = self.state();
            st.resp.set(2);
            *st.control.borrow_mut() = Some(control.clone());
            st.host.set(Some(host));
        }
        let unbind = Unbind(&self.lua);
        let result = self.run_bound(f, inv, is_eval, proto, out);
        drop(unbind);
        control.end();
        if let Err(e) = result {
            let msg = format!("ERR Error running script {}, {}", inv.name, e);
            encode::error(out, msg.as_bytes());
        }
    }

    fn run_bound(
        &self,
        f: &Function,
        inv: &Invocation<'_>,
        is_eval: bool,
        proto: Proto,
        out: &mut Vec<u8>,
    ) -> mlua::Result<()> {
        let keys = self.array(inv.keys)?;
        let args = self.array(inv.args)?;
        let rets = if is_eval {
            self.globals.raw_set(&self.keys_name, keys)?;
            self.globals.raw_set(&self.argv_name, args)?;
            self.run_fn.call::<MultiValue>(f.clone())?
        } else {
            self.run_fn.call::<MultiValue>((f.clone(), keys, args))?
        };
        let resp = self.state().resp.get();
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

/// Clears the run's host and control when dropped, so a panic out of a host call cannot
/// leave a dangling host pointer behind.
struct Unbind<'a>(&'a Lua);

impl Drop for Unbind<'_> {
    fn drop(&mut self) {
        if let Some(st) = self.0.app_data_ref::<RunState>() {
            st.host.set(None);
            *st.control.borrow_mut() = None;
        }
    }
}

/// What a script asks of the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HostOp {
    /// `redis.call`: an error reply is raised.
    Call,
    /// `redis.pcall`: an error reply is returned.
    Pcall,
    /// `redis.log`.
    Log,
    /// `redis.acl_check_cmd`.
    Acl,
}

/// `redis.call` / `pcall` / `log` / `acl_check_cmd`: runs `op` against the current run's host.
fn host_op(lua: &Lua, op: HostOp, args: MultiValue) -> mlua::Result<MultiValue> {
    let (host, control) = {
        let st = lua.app_data_ref::<RunState>().expect("run state installed");
        (st.host.get(), st.control())
    };
    let r = match (host, control) {
        (Some(mut host), Some(control)) => {
            // SAFETY: see `LuaRuntime::run`: the pointer is live for the whole run and this
            // is its only user while the reference exists.
            let host = unsafe { host.as_mut() };
            host_request(lua, host, &control, op, args)
        }
        _ => Err(redis_lib::raise(
            lua,
            "This Redis command is not allowed from script",
        )),
    };
    finish(lua, r)
}

/// One host request with Redis's argument checks and reply conversion.
fn host_request(
    lua: &Lua,
    host: &mut dyn Host,
    control: &ScriptControl,
    op: HostOp,
    args: MultiValue,
) -> LibResult {
    let args = args.into_vec();
    match op {
        HostOp::Call | HostOp::Pcall => {
            let raise = op == HostOp::Call;
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
            let resp = lua.app_data_ref::<RunState>().map_or(2, |s| s.resp.get());
            let reply = host.call(argv, resp);
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
        HostOp::Log => {
            let (level, msg) = redis_lib::parse_log(lua, &args)?;
            host.log(level, &msg);
            Ok(MultiValue::new())
        }
        HostOp::Acl => {
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
        Ok(Value::Integer(n)) => crate::numfmt::lua_number_text(n as f64).into_bytes(),
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
