//! The Python interpreter that tests drive kvik with (redis-py and the libraries built on it).
//!
//! `make deps` (scripts/deps.sh) makes one virtualenv per machine, `$KVIK_PYENV` or
//! `~/.cache/kvik-pyenv`, with the pinned packages of scripts/test-requirements.txt. Tests use
//! that interpreter and nothing else, so a test can never pass because of what the system Python
//! happens to have. A missing or broken virtualenv fails the test with the command to run; the
//! one way to leave Python tests out is to say so with `KVIK_SKIP_PYTHON=1`.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;

/// Set to `1` to skip the tests that need the Python virtualenv (they print SKIPPED and pass).
pub const SKIP_PYTHON_ENV: &str = "KVIK_SKIP_PYTHON";

/// How long one Python script may run before the test fails.
const PYTHON_TIMEOUT_SECS: u32 = 120;

/// The virtualenv's interpreter; `None` only when `KVIK_SKIP_PYTHON=1` (then the caller returns
/// early). Fails the test, saying what to run, when the virtualenv is missing or lacks redis-py.
pub fn python() -> Option<PathBuf> {
    if std::env::var(SKIP_PYTHON_ENV).is_ok_and(|v| v == "1") {
        eprintln!("SKIPPED: {SKIP_PYTHON_ENV}=1 leaves out the tests that drive kvik from Python");
        return None;
    }
    static CHECKED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match CHECKED.get_or_init(find_python) {
        Ok(p) => Some(p.clone()),
        Err(e) => panic!("{e}"),
    }
}

fn pyenv_dir() -> PathBuf {
    match std::env::var_os("KVIK_PYENV") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/kvik-pyenv"),
    }
}

fn find_python() -> Result<PathBuf, String> {
    let dir = pyenv_dir();
    let python = dir.join("bin/python");
    let fix = format!(
        "run `make deps` (it makes the test virtualenv {} with scripts/test-requirements.txt), \
         or set {SKIP_PYTHON_ENV}=1 to leave the Python tests out",
        dir.display()
    );
    if !python.exists() {
        return Err(format!(
            "the test virtualenv has no {}: {fix}",
            python.display()
        ));
    }
    let import = Command::new(&python)
        .args(["-c", "import redis"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}: {fix}", python.display()))?;
    if !import.status.success() {
        return Err(format!(
            "redis-py does not import in {}: {}\n{fix}",
            python.display(),
            String::from_utf8_lossy(&import.stderr)
        ));
    }
    Ok(python)
}

/// [`run_python`] for a script that must succeed: its standard output, or a panic that shows
/// its standard error; `None` when Python tests are skipped.
pub fn python_stdout(script: &str, args: &[&str]) -> Option<String> {
    let out = run_python(script, args)?;
    assert!(
        out.status.success(),
        "the Python script failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `script` (`python -c script args...`) with the virtualenv's interpreter, bounded in
/// time; `None` when Python tests are skipped. The caller checks the status and output.
pub fn run_python(script: &str, args: &[&str]) -> Option<Output> {
    let python = python()?;
    let out = Command::new("timeout")
        .arg(PYTHON_TIMEOUT_SECS.to_string())
        .arg(&python)
        .arg("-c")
        .arg(script)
        .args(args)
        .env("PYTHONNOUSERSITE", "1")
        .output()
        .expect("timeout (coreutils) runs the Python script");
    Some(out)
}
