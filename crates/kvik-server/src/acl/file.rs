//! The ACL file (`aclfile`): one `user <name> <rules...>` line per user, as ACL LIST prints them.
//! ACL LOAD and startup read it whole and apply it only if every line is valid; ACL SAVE writes
//! it to a temporary file and renames it over the old one, so a crash never leaves half a file.

use super::rules::{merge_selectors, User};
use super::Acl;
use std::path::Path;

/// Parses an ACL file; `Err` names the file and line at fault, as Redis does.
pub fn parse(path: &Path, text: &str, all_channels: bool) -> Result<Vec<User>, String> {
    let mut users: Vec<User> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let at = |msg: &str| format!("{}:{}: {msg}", path.display(), n + 1);
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words: Vec<Vec<u8>> = line
            .split_ascii_whitespace()
            .map(|w| w.as_bytes().to_vec())
            .collect();
        if words[0] != b"user" || words.len() < 2 {
            return Err(at("line should start with user keyword"));
        }
        let name = String::from_utf8_lossy(&words[1]).into_owned();
        if users.iter().any(|u| u.name == name) {
            return Err(at(&format!("Duplicate user '{name}' found")));
        }
        let ops = merge_selectors(&words[2..]).map_err(|start| {
            at(&format!(
                "Unmatched parenthesis in acl selector starting at '{}'.",
                String::from_utf8_lossy(&start)
            ))
        })?;
        let mut user = User::new(&name, all_channels);
        for op in &ops {
            user.apply(op, all_channels).map_err(|reason| {
                at(&format!(
                    "Error in applying operation '{}': {reason}",
                    String::from_utf8_lossy(op)
                ))
            })?;
        }
        users.push(user);
    }
    Ok(users)
}

/// Loads `path` into `acl` (all users replaced), or changes nothing.
pub fn load(acl: &Acl, path: &Path, all_channels: bool) -> Result<(), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("Error loading ACLs, opening file '{}': {e}", path.display()))?;
    let users = parse(path, &text, all_channels)?;
    acl.replace_all(users);
    Ok(())
}

/// Writes every user to `path`, atomically.
pub fn save(acl: &Acl, path: &Path) -> Result<(), String> {
    let mut text = String::new();
    for u in acl.all() {
        text.push_str(&u.describe());
        text.push('\n');
    }
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("There was an error trying to save the ACLs. Please check the server logs for more information: {e}")
    })
}

/// Startup: loads `aclfile` if set. Users in the config file and an ACL file exclude each
/// other, as in Redis.
pub fn at_startup(config: &crate::config::Config) -> Result<(), String> {
    let Some(path) = crate::cmd::acl::acl_file(config) else {
        return Ok(());
    };
    if config
        .acl
        .config_users
        .load(std::sync::atomic::Ordering::Relaxed)
    {
        return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into());
    }
    let all_channels = crate::cmd::acl::pubsub_default_all(config);
    load(&config.acl, &path, all_channels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_then_load_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users.acl");
        let acl = Acl::default();
        acl.set_user(
            b"alice",
            &[
                b"on".to_vec(),
                b">pw".to_vec(),
                b"~a*".to_vec(),
                b"+get".to_vec(),
                b"(+set".to_vec(),
                b"~b*)".to_vec(),
            ],
            false,
        )
        .unwrap();
        save(&acl, &path).unwrap();
        let before: Vec<String> = acl.all().iter().map(User::describe).collect();
        let other = Acl::default();
        load(&other, &path, false).unwrap();
        let after: Vec<String> = other.all().iter().map(User::describe).collect();
        assert_eq!(before, after);
        std::fs::write(&path, "user bob on +nosuch\n").unwrap();
        let e = load(&other, &path, false).unwrap_err();
        assert!(e.ends_with(":1: Error in applying operation '+nosuch': Unknown command or category name in ACL"), "{e}");
        assert_eq!(other.names(), ["alice", "default"]);
    }
}
