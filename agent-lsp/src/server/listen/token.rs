//! The secret a TCP `serve --listen` asks of every editor: a fresh random token written to a
//! file only its owner can read (the path goes to stderr, never the token), or one read from
//! `--token-file`, refused when anyone but its owner can read it.
//!
//! Loopback TCP is open to every local process and every local user; the file's permissions
//! are what makes the token the user's alone.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

/// Random bytes in a generated token (hex-encoded in the file).
const TOKEN_BYTES: usize = 32;
/// A token from a file shorter than this is too easy to guess.
const MIN_TOKEN_CHARS: usize = 16;

/// A connection secret. Its `Debug` never shows it.
pub(crate) struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Token(…)")
    }
}

impl Token {
    /// A fresh token from the kernel's random source.
    pub(crate) fn generate() -> anyhow::Result<Token> {
        let mut bytes = [0u8; TOKEN_BYTES];
        let filled = rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty())
            .context("cannot draw a random token")?;
        if filled != TOKEN_BYTES {
            bail!("cannot draw a random token: the kernel gave too few bytes");
        }
        Ok(Token(
            bytes.iter().map(|byte| format!("{byte:02x}")).collect(),
        ))
    }

    /// The token in `path` (surrounding whitespace ignored), which must be the user's own file
    /// with no permission for group or others: a token others can read authenticates them.
    pub(crate) fn read(path: &Path) -> anyhow::Result<Token> {
        let shown = path.display();
        let file = std::fs::File::open(path)
            .with_context(|| format!("cannot open the token file {shown}"))?;
        let metadata = file
            .metadata()
            .with_context(|| format!("cannot read the token file {shown}"))?;
        if metadata.uid() != rustix::process::getuid().as_raw() {
            bail!("the token file {shown} belongs to another user: use a file of your own");
        }
        let mode = metadata.mode() & 0o777;
        if mode & 0o077 != 0 {
            bail!(
                "the token file {shown} is open to group or others (mode {mode:03o}): run `chmod 600 {shown}`"
            );
        }
        let text = std::io::read_to_string(file)
            .with_context(|| format!("cannot read the token file {shown}"))?;
        let token = text.trim();
        if token.chars().count() < MIN_TOKEN_CHARS {
            bail!(
                "the token in {shown} is shorter than {MIN_TOKEN_CHARS} characters: too easy to guess"
            );
        }
        Ok(Token(token.to_owned()))
    }

    /// Write the token to `path`, readable by its owner only, replacing a stale file: it is
    /// written to a new file of mode 0600 (created exclusively, so nobody else holds it open)
    /// and renamed into place, so no reader ever sees a partial or wider-open token. The
    /// directory is made (or narrowed to) 0700.
    pub(crate) fn save(&self, path: &Path) -> anyhow::Result<()> {
        let directory = path.parent().context("a token file path has a directory")?;
        private_directory(directory)?;
        let mut file = tempfile::Builder::new()
            .prefix(".token-")
            .permissions(std::fs::Permissions::from_mode(0o600))
            .tempfile_in(directory)
            .with_context(|| format!("cannot create a token file in {}", directory.display()))?;
        writeln!(file, "{}", self.0)
            .and_then(|()| file.as_file().sync_all())
            .with_context(|| format!("cannot write a token file in {}", directory.display()))?;
        file.persist(path)
            .with_context(|| format!("cannot write the token file {}", path.display()))?;
        Ok(())
    }

    /// Whether `offered` is this token. The comparison takes the same time whatever `offered`
    /// is: it compares digests of both (so lengths do not matter) without stopping at the first
    /// difference, and a digest's matching prefix says nothing of the token's.
    pub(crate) fn matches(&self, offered: &str) -> bool {
        let ours = Sha256::digest(self.0.as_bytes());
        let theirs = Sha256::digest(offered.as_bytes());
        let difference = ours
            .iter()
            .zip(theirs.iter())
            .fold(0u8, |difference, (a, b)| {
                std::hint::black_box(difference | (a ^ b))
            });
        difference == 0
    }
}

/// Where a generated token of the server listening on `address` is written: the user's
/// runtime directory (`$XDG_RUNTIME_DIR`, private and emptied at logout) when there is one,
/// else the state root's `run/`.
pub(crate) fn default_path(address: std::net::SocketAddr) -> anyhow::Result<PathBuf> {
    let directory = match dirs::runtime_dir() {
        Some(runtime) => runtime.join("agent-lsp"),
        None => crate::session::store::state_root()?.join("run"),
    };
    Ok(directory.join(format!("listen-{}-{}.token", address.ip(), address.port())))
}

/// Make `directory` (and its parents) if missing, and leave it the user's alone (0700): a
/// directory others may write to would let them swap the token file.
fn private_directory(directory: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let shown = directory.display();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(directory)
        .with_context(|| format!("cannot create {shown}"))?;
    let metadata = std::fs::metadata(directory).with_context(|| format!("cannot read {shown}"))?;
    if metadata.uid() != rustix::process::getuid().as_raw() {
        bail!("{shown} belongs to another user: it cannot hold your token");
    }
    if metadata.mode() & 0o077 != 0 {
        std::fs::set_permissions(directory, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("cannot make {shown} private"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(dir: &Path, text: &str, mode: u32) -> PathBuf {
        let path = dir.join("token");
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn a_token_matches_itself_only() {
        let token = Token::generate().unwrap();
        assert_eq!(token.0.len(), 2 * TOKEN_BYTES);
        assert!(token.matches(&token.0.clone()));
        assert!(!token.matches(""));
        assert!(!token.matches(&token.0[1..]));
        assert!(!token.matches(&format!("{}0", token.0)));
        assert_ne!(token.0, Token::generate().unwrap().0);
        assert_eq!(format!("{token:?}"), "Token(…)");
    }

    #[test]
    fn a_saved_token_is_private_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/agent-lsp/listen.token");
        let token = Token::generate().unwrap();
        token.save(&path).unwrap();
        let mode = |path: &Path| std::fs::metadata(path).unwrap().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert!(Token::read(&path).unwrap().matches(&token.0));
        // A second server on the same address replaces the stale file.
        let fresh = Token::generate().unwrap();
        fresh.save(&path).unwrap();
        assert!(Token::read(&path).unwrap().matches(&fresh.0));
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1
        );
    }

    #[test]
    fn a_token_file_others_can_read_or_a_short_token_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let secret = "0123456789abcdef0123";
        let open = file_with(dir.path(), secret, 0o644);
        let error = format!("{:#}", Token::read(&open).unwrap_err());
        assert!(
            error.contains("mode 644") && error.contains("chmod 600"),
            "{error}"
        );
        assert!(!error.contains(secret), "{error}");
        let group = file_with(dir.path(), secret, 0o640);
        assert!(Token::read(&group).is_err());
        let short = file_with(dir.path(), "short\n", 0o600);
        let error = format!("{:#}", Token::read(&short).unwrap_err());
        assert!(error.contains("shorter than 16"), "{error}");
        let fine = file_with(dir.path(), &format!("  {secret}\n"), 0o400);
        assert!(Token::read(&fine).unwrap().matches(secret));
    }
}
