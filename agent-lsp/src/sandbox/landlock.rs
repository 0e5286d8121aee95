//! The second mechanism: Landlock for the file system and a seccomp filter for the network,
//! applied by the child itself between `fork` and `exec`, where bubblewrap is missing or
//! refused (Landlock needs no namespaces, so a container that forbids them still allows it).
//!
//! Landlock only grants rights: beneath a path given a right, every file has it, and nothing
//! can take a right back from a subfolder. So what bubblewrap does by mounting over a path is
//! done here by granting around it, in rules computed in the parent for each command:
//! - read (and execute) everywhere, except the home's secrets: read is granted on each sibling
//!   of every folder on the way from `/` down to a secret, and the folders on that way get only
//!   the right to list their entries (so the names in `~/.ssh` can be listed, not read);
//! - write in the sandbox's private temporary folder (`TMPDIR`, `TMP`, `TEMP`: Landlock cannot
//!   mount a private `/tmp`, which stays readable and not writable);
//! - in `/dev`, only the few character devices a shell uses (`/dev/null`, ...), read and
//!   written, and `/dev/shm` read;
//! - under `workspace-write`, write beneath each top-level entry of the workspace except the
//!   protected names (a folder: every right beneath it; a file: write and truncate), and none
//!   on the workspace's root folder itself, since a right there reaches `.git/hooks/` too. So a
//!   command can create and remove files in any subfolder and edit the files at the root, but
//!   cannot create or remove an entry at the root (bubblewrap can); a protected name that does
//!   not exist yet cannot be created either.
//!
//! Without network, a seccomp filter refuses `socket()` for every family but `AF_UNIX` (and
//! `io_uring_setup`, whose rings could open sockets out of the filter's sight), Landlock refuses
//! TCP bind and connect where the kernel knows how (ABI 4), and abstract Unix sockets outside
//! the sandbox are out of reach (ABI 6). In every case a sandboxed command cannot signal a
//! process outside it (ABI 6), and Landlock's ptrace rule keeps it from the memory, files and
//! descriptors of the agent through `/proc`. Not its `/proc/PID/environ`, which the kernel lets
//! it read: no more than what a command inherits from the agent anyway, but bubblewrap's PID
//! namespace hides even that.
//!
//! Everything that allocates (the ruleset and its rules, the seccomp program) is built in the
//! parent; the child, a fork of a multithreaded process, only makes the two system calls.

use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, LandlockStatus,
    PathBeneath, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};
use rustix::fs::{FileType, Mode as FileMode, OFlags};

use super::{Mode, PROTECTED_NAMES, Sandbox};

/// The Landlock ABI whose rights the rules handle: 6 adds the signal and abstract-socket scopes
/// to 5's device ioctls, 4's TCP rules, 3's truncation and 2's renames across folders. On an
/// older kernel the crate's best effort drops what the kernel does not know, and the record says
/// the sandbox is only partly enforced.
pub(super) const TARGET_ABI: ABI = ABI::V6;

/// The devices a command may open, to read, write and control: what ordinary shells and tools
/// open. The others (raw disks, the kernel's log) are refused; `/dev/shm` is readable, not
/// writable, so POSIX shared memory and semaphores (Python's `multiprocessing` locks) fail;
/// `/dev/stdout` and its kind are links to the descriptors the command already has.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/random",
    "/dev/urandom",
];

/// The kernel's Landlock ABI when it enforces Landlock here, else why not; probed once per
/// process.
pub(super) fn available() -> Result<i32, &'static String> {
    static AVAILABLE: std::sync::OnceLock<Result<i32, String>> = std::sync::OnceLock::new();
    AVAILABLE.get_or_init(probe).as_ref().copied()
}

/// What the record says of the mechanism: Landlock, and how far the kernel enforces it.
pub(super) fn describe(abi: i32) -> String {
    let target = abi_number(TARGET_ABI);
    if abi >= target {
        format!("landlock (ABI {abi})")
    } else {
        format!(
            "landlock (ABI {abi}, partly enforced: the rights of ABIs up to {target} are not held)"
        )
    }
}

/// The number of a Landlock ABI (the crate's enum is non-exhaustive, so it has no cast).
fn abi_number(abi: ABI) -> i32 {
    (0..=i32::from(u8::MAX))
        .find(|number| ABI::from(*number) == abi)
        .unwrap_or(0)
}

/// Restrict a throwaway thread with the rights the commands get (Landlock confines one thread
/// unless asked otherwise), and read from the result whether the kernel enforced them and
/// which ABI it has: the crate keeps the ABI query to itself.
fn probe() -> Result<i32, String> {
    let restrict = || -> anyhow::Result<landlock::RestrictionStatus> {
        let ruleset = handled(false)?.create()?;
        Ok(ruleset.restrict_self()?)
    };
    let status = std::thread::spawn(restrict)
        .join()
        .map_err(|_| "the Landlock probe panicked".to_owned())?
        .map_err(|error| format!("Landlock cannot restrict a process here: {error:#}"))?;
    match (status.ruleset, status.landlock) {
        (RulesetStatus::NotEnforced, LandlockStatus::NotEnabled) => {
            Err("Landlock is built into the kernel but not enabled".to_owned())
        }
        (RulesetStatus::NotEnforced, _) => Err("the kernel has no Landlock".to_owned()),
        (_, LandlockStatus::Available { effective_abi, .. }) => Ok(abi_number(effective_abi)),
        (_, _) => Err("the kernel has no Landlock".to_owned()),
    }
}

/// The ruleset's handled rights: every file-system right of [`TARGET_ABI`], the signal scope,
/// and without network TCP and abstract Unix sockets too.
fn handled(network: bool) -> anyhow::Result<Ruleset> {
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(TARGET_ABI))?
        .scope(Scope::Signal)?;
    if !network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(TARGET_ABI))?
            .scope(Scope::AbstractUnixSocket)?;
    }
    Ok(ruleset)
}

impl Sandbox {
    /// `program args…` in `root` that confines itself before `exec`. When the rules cannot be
    /// built, the command fails to start rather than run unconfined.
    pub(super) fn landlock_command<A: AsRef<std::ffi::OsStr>>(
        &self,
        root: &Path,
        program: &str,
        args: &[A],
    ) -> Command {
        let mut sh = super::unconfined(root, program, args);
        sh.envs(self.private_env());
        let confinement = self.ruleset().and_then(|ruleset| {
            let filter = if self.policy.network {
                None
            } else {
                Some(network_filter()?)
            };
            Ok((ruleset, filter))
        });
        let confinement = confinement.map_err(|error| {
            tracing::error!(
                "the Landlock sandbox cannot be built, the command is refused: {error:#}"
            );
        });
        apply_in_child(&mut sh, confinement.ok());
        sh
    }

    /// The variables that point a command at its private temporary folder (Landlock's; under
    /// bubblewrap `/tmp` itself is private and nothing needs saying).
    pub fn private_env(&self) -> Vec<(&'static str, PathBuf)> {
        let Some(temp) = &self.temp else {
            return Vec::new();
        };
        ["TMPDIR", "TMP", "TEMP"]
            .into_iter()
            .map(|name| (name, temp.path().to_owned()))
            .collect()
    }

    /// The Landlock ruleset of one command, its rules added (the rules follow the workspace's
    /// top-level entries as they are now).
    fn ruleset(&self) -> anyhow::Result<RulesetCreated> {
        let read = AccessFs::from_read(TARGET_ABI);
        let write = AccessFs::from_write(TARGET_ABI);
        let secrets = self.existing_secrets();
        let mut rules: Vec<(OwnedFd, BitFlags<AccessFs>)> = Vec::new();
        let mut grant = |path: &Path, access: BitFlags<AccessFs>| {
            if let Some(rule) = rule(path, access) {
                rules.push(rule);
            }
        };
        let mut listed = Vec::new();
        let mut readable = Vec::new();
        // `/dev` is held apart like a secret: read on it all would hand root the raw disks
        // (and the home's secrets on them); only the devices below are granted.
        let apart: Vec<PathBuf> = secrets
            .iter()
            .cloned()
            .chain([PathBuf::from("/dev")])
            .collect();
        around(Path::new("/"), &apart, &mut listed, &mut readable);
        listed.push(PathBuf::from("/dev"));
        readable.push(PathBuf::from("/dev/shm"));
        for path in &listed {
            grant(path, AccessFs::ReadDir.into());
        }
        for path in &readable {
            grant(path, read);
        }
        if let Some(temp) = &self.temp {
            grant(temp.path(), read | write);
        }
        for device in DEVICES {
            grant(
                Path::new(device),
                read | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev,
            );
        }
        if self.policy.mode == Mode::WorkspaceWrite {
            for entry in std::fs::read_dir(&self.workspace)? {
                let path = entry?.path();
                let protected = PROTECTED_NAMES
                    .iter()
                    .any(|(name, _)| path.file_name() == Some(name.as_ref()));
                // A workspace that holds the home (or is it) keeps the secrets unwritable too.
                let holds_secret = secrets.iter().any(|secret| secret.starts_with(&path));
                if !protected && !holds_secret {
                    grant(&path, write);
                }
            }
        }
        let mut ruleset = handled(self.policy.network)?.create()?;
        for (fd, access) in rules {
            ruleset = ruleset.add_rule(PathBeneath::new(fd, access))?;
        }
        Ok(ruleset)
    }

    /// The home's secrets that exist, where they really are (a secret reached through a link
    /// is hidden at its target).
    fn existing_secrets(&self) -> Vec<PathBuf> {
        self.secrets()
            .iter()
            .filter_map(|secret| secret.canonicalize().ok())
            .collect()
    }
}

/// Split the tree at `path` around `secrets`: a folder with no secret beneath is readable as a
/// whole, a folder on the way to one is only listed and its entries are split in turn, and a
/// secret is left out.
fn around(
    path: &Path,
    secrets: &[PathBuf],
    listed: &mut Vec<PathBuf>,
    readable: &mut Vec<PathBuf>,
) {
    if secrets.iter().any(|secret| secret == path) {
        return;
    }
    if !secrets.iter().any(|secret| secret.starts_with(path)) {
        readable.push(path.to_owned());
        return;
    }
    listed.push(path.to_owned());
    // An entry that cannot be listed stays unreadable: the sandbox fails closed.
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    for entry in entries.flatten() {
        around(&entry.path(), secrets, listed, readable);
    }
}

/// A rule granting `access` beneath `path`, or none when `path` is missing or is a link: a link
/// is followed by whoever opens it, to a target that its own rules govern, so a link in the
/// workspace to `/etc` grants nothing on `/etc`. A file gets the rights that apply to files.
fn rule(path: &Path, access: BitFlags<AccessFs>) -> Option<(OwnedFd, BitFlags<AccessFs>)> {
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::open(path, flags, FileMode::empty()).ok()?;
    let kind = FileType::from_raw_mode(rustix::fs::fstat(&fd).ok()?.st_mode);
    match kind {
        FileType::Symlink => None,
        FileType::Directory => Some((fd, access)),
        _ => Some((fd, access & AccessFs::from_file(TARGET_ABI))),
    }
}

/// The seccomp program that refuses (`EPERM`) a socket of any family but `AF_UNIX`, and
/// `io_uring_setup`. The filter's architecture check kills a process that switches to another
/// system call table (32-bit calls on x86_64); x32 calls share the architecture, so their
/// `socket` is listed too.
fn network_filter() -> anyhow::Result<seccompiler::BpfProgram> {
    use seccompiler::{SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompRule};
    let not_unix = SeccompRule::new(vec![SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Ne,
        libc::AF_UNIX as u64,
    )?])?;
    let mut rules = std::collections::BTreeMap::new();
    rules.insert(libc::SYS_socket, vec![not_unix.clone()]);
    #[cfg(target_arch = "x86_64")]
    rules.insert(libc::SYS_socket | 0x4000_0000, vec![not_unix]);
    rules.insert(libc::SYS_io_uring_setup, Vec::new());
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|_| anyhow::anyhow!("no seccomp filter for {}", std::env::consts::ARCH))?;
    let filter = seccompiler::SeccompFilter::new(
        rules,
        seccompiler::SeccompAction::Allow,
        seccompiler::SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?;
    Ok(filter.try_into()?)
}

/// Have the child restrict itself with `confinement` (the ruleset, then the seccomp filter)
/// before `exec`; with none (it could not be built), the child fails before `exec`.
#[allow(unsafe_code)]
fn apply_in_child(
    sh: &mut Command,
    confinement: Option<(RulesetCreated, Option<seccompiler::BpfProgram>)>,
) {
    let (mut ruleset, filter) = match confinement {
        Some((ruleset, filter)) => (Some(ruleset), filter),
        None => (None, None),
    };
    let refused = || std::io::Error::from_raw_os_error(libc::EPERM);
    let confine = move || -> std::io::Result<()> {
        // Each spawn forks a copy of this state, so the ruleset taken here is the child's.
        let ruleset = ruleset.take().ok_or_else(refused)?;
        let status = ruleset.restrict_self().map_err(|_| refused())?;
        if status.ruleset == RulesetStatus::NotEnforced {
            return Err(refused());
        }
        if let Some(filter) = &filter {
            seccompiler::apply_filter(filter).map_err(|_| refused())?;
        }
        Ok(())
    };
    // SAFETY: `confine` runs in the child between `fork` and `exec`, where only
    // async-signal-safe work is sound in a multithreaded parent. It allocates nothing: the
    // ruleset and the filter were built in the parent, and it makes the `prctl`,
    // `landlock_restrict_self` and `seccomp` system calls, closes the ruleset's descriptor and
    // builds errors from raw codes.
    unsafe {
        sh.pre_exec(confine);
    }
}
