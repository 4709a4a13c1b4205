//! The Lua states of one thread. mlua states are single-threaded, so every thread that runs a
//! script (a worker, or an I/O thread running one to completion) owns an EVAL engine and a
//! functions engine (in a thread-local), built on its first script. They follow the shared truth in [`crate::scripting::Scripts`]: a script the
//! thread has not compiled yet is compiled from the shared cache's body, and a SCRIPT FLUSH or a
//! change of the function libraries (seen by generation numbers, one atomic load each) makes the
//! thread drop or rebuild its state before its next script. Scripts therefore run in parallel
//! on different threads; what keeps them apart is the key locks (see `super::run`).

use crate::error::{CmdError, CmdResult};
use crate::scripting::{load_libraries, Scripts, Slot};
use crate::server::Server;
use kvik_lua::{errors, sha1_hex, EvalEngine, FunctionEngine};
use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// One thread's engines and where they stand against the shared state.
pub struct Engines {
    /// The [`Scripts::id`] of the server they belong to.
    owner: u64,
    eval_generation: u64,
    libraries_generation: u64,
    pub eval: EvalEngine,
    pub functions: FunctionEngine,
    /// This thread's entry in the running-scripts registry.
    pub slot: Arc<Slot>,
}

thread_local! {
    static ENGINES: RefCell<Option<Engines>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's engines, brought up to date with `server`'s scripts first.
/// Not re-entrant: nothing a script can call (every scripting command is `noscript`) comes
/// back here.
pub fn with<R>(
    server: &Server,
    f: impl FnOnce(&mut Engines) -> Result<R, CmdError>,
) -> Result<R, CmdError> {
    ENGINES.with(|cell| {
        let mut cell = cell.borrow_mut();
        let scripts = &server.scripts;
        if cell.as_ref().is_none_or(|e| e.owner != scripts.id) {
            *cell = Some(Engines {
                owner: scripts.id,
                eval_generation: scripts.eval_generation.load(Ordering::Acquire),
                libraries_generation: u64::MAX,
                eval: EvalEngine::new(),
                functions: FunctionEngine::new(),
                slot: scripts.new_slot(),
            });
        }
        let engines = cell.as_mut().expect("just built");
        engines.catch_up(scripts)?;
        f(engines)
    })
}

impl Engines {
    fn catch_up(&mut self, scripts: &Scripts) -> CmdResult {
        let eval_generation = scripts.eval_generation.load(Ordering::Acquire);
        if eval_generation != self.eval_generation {
            self.eval.flush();
            self.eval_generation = eval_generation;
        }
        if scripts.libraries_generation.load(Ordering::Acquire) != self.libraries_generation {
            let libs = scripts.libraries.lock();
            load_libraries(&mut self.functions, libs.payload.as_deref()).map_err(|e| {
                tracing::error!(error = %e, "cannot load the function libraries");
                CmdError::err(e)
            })?;
            self.libraries_generation = libs.generation;
        }
        Ok(())
    }

    /// Marks the thread's libraries as those of `generation` (the thread made the change).
    pub fn libraries_at(&mut self, generation: u64) {
        self.libraries_generation = generation;
    }

    /// Whether the thread's libraries are older than `generation`.
    pub fn libraries_behind(&self, generation: u64) -> bool {
        self.libraries_generation != generation
    }

    /// Forces a reload of the libraries before the next use (a change failed half-way).
    pub fn libraries_stale(&mut self) {
        self.libraries_generation = u64::MAX;
    }

    /// EVAL's script: compiled here if new, and added to the shared cache. Returns its SHA.
    pub fn eval_body(&mut self, scripts: &Scripts, body: &[u8]) -> Result<String, String> {
        let sha = sha1_hex(body);
        if !self.eval.exists(sha.as_bytes()) {
            self.eval.prepare_eval(body)?;
        }
        if !scripts.eval.read().contains(&sha) {
            scripts.eval.write().insert(&sha, body, false);
        }
        Ok(sha)
    }

    /// EVALSHA's script: compiled here from the shared cache if this thread has not yet. The
    /// SHA as the caches key it (borrowed from `sha` when it is lower case already).
    pub fn eval_sha<'a>(
        &mut self,
        scripts: &Scripts,
        sha: &'a [u8],
    ) -> Result<Cow<'a, str>, String> {
        let Some(sha) = kvik_lua::eval::normalize_sha(sha) else {
            return Err(errors::NOSCRIPT.into());
        };
        if self.eval.contains(&sha) {
            return Ok(sha);
        }
        let body = scripts.eval.read().get(&sha).map(|b| b.body.clone());
        match body {
            Some(body) => self.eval.prepare_eval(&body).map(Cow::Owned),
            None => Err(errors::NOSCRIPT.into()),
        }
    }

    /// SCRIPT LOAD: compiles `body` and keeps it in the shared cache until SCRIPT FLUSH.
    pub fn script_load(&mut self, scripts: &Scripts, body: &[u8]) -> Result<String, String> {
        let sha = self.eval.script_load(body)?;
        scripts.eval.write().insert(&sha, body, true);
        Ok(sha)
    }
}
