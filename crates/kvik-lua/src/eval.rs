//! [`EvalEngine`]: EVAL, EVALSHA and the SCRIPT subcommands over one Lua state.
//!
//! Scripts are compiled once per SHA1 and kept in a bounded cache: scripts added by SCRIPT
//! LOAD stay until SCRIPT FLUSH (clients rely on them), scripts added by EVAL are evicted
//! oldest first past the bound (a client then gets NOSCRIPT and falls back to EVAL, as the
//! EVALSHA contract says).

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use kvik_resp::encode;
use mlua::Function;

use crate::errors;
use crate::flags::{parse_eval_shebang, ScriptFlags};
use crate::host::RunContext;
use crate::runtime::{Invocation, Kind, LuaRuntime};
use crate::script::{sha1_hex, split_keys_args};

/// How many EVAL-introduced scripts the cache keeps by default.
pub const DEFAULT_MAX_EVAL_SCRIPTS: usize = 10_000;

struct CachedScript {
    body: Arc<[u8]>,
    flags: ScriptFlags,
    func: Function,
    loaded: bool,
}

/// The EVAL engine: a sandboxed Lua state and its script cache.
pub struct EvalEngine {
    rt: LuaRuntime,
    scripts: HashMap<String, CachedScript>,
    eval_order: VecDeque<String>,
    max_eval_scripts: usize,
}

impl std::fmt::Debug for EvalEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvalEngine")
            .field("scripts", &self.scripts.len())
            .finish()
    }
}

impl Default for EvalEngine {
    fn default() -> Self {
        EvalEngine::new()
    }
}

impl EvalEngine {
    /// A fresh engine with the default cache bound.
    pub fn new() -> EvalEngine {
        EvalEngine::with_max_eval_scripts(DEFAULT_MAX_EVAL_SCRIPTS)
    }

    /// A fresh engine keeping at most `max` EVAL-introduced scripts.
    pub fn with_max_eval_scripts(max: usize) -> EvalEngine {
        EvalEngine {
            rt: LuaRuntime::new(Kind::Eval).expect("the Lua sandbox builds"),
            scripts: HashMap::new(),
            eval_order: VecDeque::new(),
            max_eval_scripts: max.max(1),
        }
    }

    /// How many scripts the cache holds.
    pub fn len(&self) -> usize {
        self.scripts.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.scripts.is_empty()
    }

    /// SCRIPT EXISTS for one SHA (case-insensitive, as Redis).
    pub fn exists(&self, sha: &[u8]) -> bool {
        normalize_sha(sha).is_some_and(|s| self.scripts.contains_key(&*s))
    }

    /// Whether the cache holds `sha`, a normalized SHA ([`normalize_sha`]).
    pub fn contains(&self, sha: &str) -> bool {
        self.scripts.contains_key(sha)
    }

    /// SCRIPT FLUSH: forgets every script and starts a new Lua state.
    pub fn flush(&mut self) {
        self.scripts.clear();
        self.eval_order.clear();
        self.rt = LuaRuntime::new(Kind::Eval).expect("the Lua sandbox builds");
    }

    /// The flags of a cached script (the server checks them before running: EVAL_RO needs
    /// `no-writes`, OOM needs `allow-oom`...).
    pub fn flags(&self, sha: &str) -> Option<ScriptFlags> {
        self.scripts.get(sha).map(|s| s.flags)
    }

    /// The body of a cached script.
    pub fn body(&self, sha: &str) -> Option<&[u8]> {
        self.scripts.get(sha).map(|s| &*s.body)
    }

    /// SCRIPT LOAD: compiles and caches `body` for good; returns its SHA1 or Redis's error.
    pub fn script_load(&mut self, body: &[u8]) -> Result<String, String> {
        self.add(body, true)
    }

    /// EVAL's first step: the SHA of `body`, compiling and caching it if new.
    pub fn prepare_eval(&mut self, body: &[u8]) -> Result<String, String> {
        self.add(body, false)
    }

    /// EVALSHA's first step: the normalized SHA if cached, else NOSCRIPT.
    pub fn prepare_evalsha<'a>(&self, sha: &'a [u8]) -> Result<Cow<'a, str>, &'static str> {
        match normalize_sha(sha) {
            Some(s) if self.scripts.contains_key(&*s) => Ok(s),
            _ => Err(errors::NOSCRIPT),
        }
    }

    fn add(&mut self, body: &[u8], loaded: bool) -> Result<String, String> {
        let sha = sha1_hex(body);
        if let Some(s) = self.scripts.get_mut(&sha) {
            s.loaded |= loaded;
            return Ok(sha);
        }
        let (flags, shebang_len) = parse_eval_shebang(body)?;
        let func = self
            .rt
            .compile("@user_script", &body[shebang_len..])
            .map_err(|e| format!("ERR Error compiling script (new function): {e}"))?;
        if !loaded {
            self.eval_order.push_back(sha.clone());
            while self.eval_order.len() > self.max_eval_scripts {
                if let Some(old) = self.eval_order.pop_front() {
                    if self.scripts.get(&old).is_some_and(|s| !s.loaded) {
                        self.scripts.remove(&old);
                    }
                }
            }
        }
        self.scripts.insert(
            sha.clone(),
            CachedScript {
                body: body.into(),
                flags,
                func,
                loaded,
            },
        );
        Ok(sha)
    }

    /// Runs the cached script `sha` with `keys` and `args`, writing its reply (or error) for a
    /// client speaking `proto`. The server has already checked flags, keys and ACLs.
    pub fn run(&mut self, sha: &str, keys: &[&[u8]], args: &[&[u8]], ctx: &mut RunContext<'_>) {
        let Some(script) = self.scripts.get(sha) else {
            encode::error(ctx.out, errors::NOSCRIPT.as_bytes());
            return;
        };
        let func = script.func.clone();
        let inv = Invocation {
            name: sha,
            keys,
            args,
        };
        self.rt.run(&func, &inv, ctx);
    }

    /// The whole of `EVAL script numkeys key... arg...` (`argv` without the command name).
    pub fn eval(&mut self, argv: &[&[u8]], ctx: &mut RunContext<'_>) {
        self.eval_generic(argv, false, ctx)
    }

    /// The whole of `EVALSHA sha numkeys key... arg...` (`argv` without the command name).
    pub fn evalsha(&mut self, argv: &[&[u8]], ctx: &mut RunContext<'_>) {
        self.eval_generic(argv, true, ctx)
    }

    fn eval_generic(&mut self, argv: &[&[u8]], by_sha: bool, ctx: &mut RunContext<'_>) {
        let Some((script, rest)) = argv.split_first() else {
            encode::error(ctx.out, b"ERR wrong number of arguments");
            return;
        };
        let (keys, args) = match split_keys_args(rest) {
            Ok(ka) => ka,
            Err(e) => return encode::error(ctx.out, e.as_bytes()),
        };
        let sha = if by_sha {
            self.prepare_evalsha(script).map_err(String::from)
        } else {
            self.prepare_eval(script).map(Cow::Owned)
        };
        match sha {
            Ok(sha) => self.run(&sha, keys, args, ctx),
            Err(e) => encode::error(ctx.out, e.as_bytes()),
        }
    }
}

/// A SHA as the cache keys it (lower case), if it has the right length: borrowed when it is
/// lower case already (clients send back what SCRIPT LOAD returned), so EVALSHA copies nothing.
pub fn normalize_sha(sha: &[u8]) -> Option<Cow<'_, str>> {
    if sha.len() != 40 {
        return None;
    }
    Some(match std::str::from_utf8(sha) {
        Ok(s) if !s.bytes().any(|b| b.is_ascii_uppercase()) => Cow::Borrowed(s),
        _ => Cow::Owned(String::from_utf8_lossy(sha).to_ascii_lowercase()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lower_case_sha_is_borrowed_and_others_are_lowered_or_refused() {
        let sha = sha1_hex(b"return 1");
        assert!(matches!(normalize_sha(sha.as_bytes()), Some(Cow::Borrowed(s)) if s == sha));
        let upper = sha.to_ascii_uppercase();
        assert!(matches!(normalize_sha(upper.as_bytes()), Some(Cow::Owned(s)) if s == sha));
        assert!(normalize_sha(&sha.as_bytes()[..39]).is_none());
        assert!(normalize_sha(b"").is_none());
        let mut engine = EvalEngine::new();
        let loaded = engine.script_load(b"return 1").unwrap();
        assert_eq!(loaded, sha);
        assert!(engine.exists(upper.as_bytes()) && engine.contains(&sha));
        assert_eq!(engine.prepare_evalsha(upper.as_bytes()).unwrap(), sha);
        assert_eq!(
            engine.prepare_evalsha(&[b'z'; 40]).unwrap_err(),
            errors::NOSCRIPT
        );
    }
}
