//! What every thread shares of scripting: the EVAL script cache (bodies by SHA1), the function
//! libraries (their code, persisted), and the scripts running right now (for BUSY, SCRIPT
//! KILL, FUNCTION KILL and FUNCTION STATS).
//!
//! Lua states are not thread-safe, so each worker thread compiles and runs scripts on its own
//! states (`cmd::script::engines`); this module is the truth they follow. A state notices a
//! SCRIPT FLUSH or a change of the libraries by a generation number and catches up before its
//! next script. The commands live in `cmd::script`.

use kvik_lua::{FunctionEngine, RunningScript, ScriptControl};
use parking_lot::{Mutex, RwLock};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Most scripts EVAL (not SCRIPT LOAD) may leave in the shared cache; older ones are forgotten
/// first (their clients get NOSCRIPT and send EVAL again, as the EVALSHA contract says).
pub const MAX_EVAL_SCRIPTS: usize = 10_000;

/// The internal record holding the function libraries (a FUNCTION DUMP payload).
pub const FUNCTIONS_RECORD: &[u8] = b"functions";

/// A script body the cache holds.
#[derive(Clone)]
pub struct CachedBody {
    pub body: Arc<[u8]>,
    /// Added by SCRIPT LOAD: kept until SCRIPT FLUSH.
    pub loaded: bool,
}

/// The EVAL script cache: SHA1 (lower-case hex) -> body.
#[derive(Default)]
pub struct EvalCache {
    bodies: HashMap<String, CachedBody>,
    /// EVAL-added SHAs, oldest first (the eviction order).
    order: VecDeque<String>,
}

impl EvalCache {
    pub fn get(&self, sha: &str) -> Option<&CachedBody> {
        self.bodies.get(sha)
    }

    pub fn contains(&self, sha: &str) -> bool {
        self.bodies.contains_key(sha)
    }

    pub fn len(&self) -> usize {
        self.bodies.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bodies.is_empty()
    }

    /// Adds a compiled-once body (`loaded`: by SCRIPT LOAD), bounded as [`MAX_EVAL_SCRIPTS`]
    /// says.
    pub fn insert(&mut self, sha: &str, body: &[u8], loaded: bool) {
        if let Some(b) = self.bodies.get_mut(sha) {
            b.loaded |= loaded;
            return;
        }
        if !loaded {
            self.order.push_back(sha.to_string());
            while self.order.len() > MAX_EVAL_SCRIPTS {
                if let Some(old) = self.order.pop_front() {
                    if self.bodies.get(&old).is_some_and(|b| !b.loaded) {
                        self.bodies.remove(&old);
                    }
                }
            }
        }
        self.bodies.insert(
            sha.to_string(),
            CachedBody {
                body: body.into(),
                loaded,
            },
        );
    }
}

/// The script a thread is running, as FUNCTION STATS and SCRIPT KILL see it.
#[derive(Clone, Debug)]
pub struct Current {
    /// The SHA (EVAL) or the function's name (FCALL).
    pub name: String,
    /// The command that started it (shares the request's bytes).
    pub command: Vec<bytes::Bytes>,
    pub is_function: bool,
}

/// One thread's scripting runtime, as other threads see it.
#[derive(Default)]
pub struct Slot {
    pub control: Arc<ScriptControl>,
    pub current: Mutex<Option<Current>>,
}

/// The function libraries every thread loads: their FUNCTION DUMP payload and a generation.
pub struct Libraries {
    /// What `FunctionEngine::dump` wrote after the last change (`None`: no library).
    pub payload: Option<Vec<u8>>,
    pub generation: u64,
}

/// Scripting state shared by every thread.
pub struct Scripts {
    /// Tells this server's states from another's (tests run several servers in one process).
    pub id: u64,
    pub eval: RwLock<EvalCache>,
    /// Bumped by SCRIPT FLUSH: thread states drop every compiled script.
    pub eval_generation: AtomicU64,
    /// FUNCTION LOAD/DELETE/FLUSH/RESTORE hold it for their whole change, so they apply one
    /// after another and the persisted record follows the same order.
    pub libraries: Mutex<Libraries>,
    /// `libraries.generation`, readable without the lock (the check before each FCALL).
    pub libraries_generation: AtomicU64,
    /// How many scripts are busy (past `busy-reply-threshold`): while 0, the BUSY check before
    /// each command is this one load.
    busy_scripts: Arc<AtomicUsize>,
    slots: Mutex<Vec<Arc<Slot>>>,
}

impl Default for Scripts {
    fn default() -> Self {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        Scripts {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            eval: RwLock::new(EvalCache::default()),
            eval_generation: AtomicU64::new(0),
            libraries: Mutex::new(Libraries {
                payload: None,
                generation: 0,
            }),
            libraries_generation: AtomicU64::new(0),
            busy_scripts: Arc::new(AtomicUsize::new(0)),
            slots: Mutex::new(Vec::new()),
        }
    }
}

impl Scripts {
    /// A new thread runtime's slot, registered so BUSY and KILL see it.
    pub fn new_slot(&self) -> Arc<Slot> {
        let slot = Arc::new(Slot {
            control: Arc::new(ScriptControl::counting_busy(
                Duration::from_secs(5),
                self.busy_scripts.clone(),
            )),
            current: Mutex::new(None),
        });
        self.slots.lock().push(slot.clone());
        slot
    }

    /// The running script that has run the longest, if any.
    fn longest(&self, functions_only: bool) -> Option<(Arc<Slot>, Current)> {
        let slots = self.slots.lock();
        slots
            .iter()
            .filter(|s| s.control.is_running())
            .filter_map(|s| Some((s.clone(), s.current.lock().clone()?)))
            .filter(|(_, c)| !functions_only || c.is_function)
            .max_by_key(|(s, _)| s.control.elapsed())
    }

    /// The BUSY error text (`BUSY ...`) when a script has run past `busy-reply-threshold`.
    pub fn busy(&self) -> Option<&'static str> {
        if self.busy_scripts.load(Ordering::Acquire) == 0 {
            return None;
        }
        let slots = self.slots.lock();
        slots
            .iter()
            .find(|s| s.control.is_busy())
            .map(|s| s.control.busy_error())
    }

    /// SCRIPT KILL (`from_script_kill`) or FUNCTION KILL of the longest running script, with
    /// Redis's errors (full lines). Only a busy script (past `busy-reply-threshold`) can be
    /// killed: Redis serves no other client before that, so its SCRIPT KILL never reaches a
    /// script that is not busy; kvik answers NOTBUSY instead of waiting.
    pub fn kill(&self, from_script_kill: bool) -> Result<(), &'static str> {
        match self.longest(false) {
            Some((slot, _)) if slot.control.is_busy() => slot.control.kill(from_script_kill),
            _ => Err(kvik_lua::errors::NOTBUSY),
        }
    }

    /// FUNCTION STATS' `running_script`.
    pub fn running_function(&self) -> Option<RunningScript> {
        let (slot, cur) = self.longest(true)?;
        Some(RunningScript {
            name: cur.name,
            command: cur.command.iter().map(|a| a.to_vec()).collect(),
            duration_ms: slot.control.elapsed().as_millis() as i64,
        })
    }
}

/// Builds the libraries of a FUNCTION DUMP payload into `engine` (FUNCTION RESTORE FLUSH), or
/// empties it.
pub fn load_libraries(engine: &mut FunctionEngine, payload: Option<&[u8]>) -> Result<(), String> {
    match payload {
        Some(p) => engine.restore(p, kvik_lua::RestorePolicy::Flush),
        None => {
            engine.flush();
            Ok(())
        }
    }
}
