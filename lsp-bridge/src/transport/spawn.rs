//! Starting a server: the command in its own process group, its stdio pipes, the state the
//! owner and the I/O tasks share, and the tasks (or the output thread) that read it.
//!
//! Apart from the writing side in `transport.rs` because it runs once per process and is where
//! a failure to start becomes [`Error::Spawn`]; everything after it only talks to the process.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot, watch};

use super::output::{Output, read_output, read_output_task, stderr_loop, watch_process};
use super::{FIRST_OWN_ID, INCOMING_QUEUE, Incoming, PendingTable, Shared, Transport, liveness};
use crate::config::{ServerConfig, find_program};
use crate::error::{Error, Result};
use crate::framing::{FrameWriter, set_blocking};

impl Transport {
    /// Start the server in `root` and its I/O tasks. Incoming requests and notifications arrive
    /// on the returned channel, which closes when the server's output ends.
    pub(crate) fn spawn(
        config: &ServerConfig,
        root: &Path,
    ) -> Result<(Transport, mpsc::Receiver<Incoming>)> {
        let program =
            find_program(&config.command).unwrap_or_else(|| config.command.clone().into());
        let mut command = match &config.launcher {
            Some(launcher) => {
                tokio::process::Command::from(launcher.command(&program, &config.args, root))
            }
            None => {
                let mut command = tokio::process::Command::new(&program);
                command.args(&config.args).current_dir(root);
                command
            }
        };
        command
            .envs(&config.env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            // Its own process group, so that stopping the server also stops what it spawned
            // (tsserver, typings installers) instead of leaving orphans behind.
            .process_group(0);
        let spawn_error = |source| Error::Spawn {
            server: config.name.clone(),
            command: config.command.clone(),
            source,
        };
        let mut process = command.spawn().map_err(spawn_error)?;
        let pid = process.id();
        let missing = || std::io::Error::other("stdio pipe missing");
        let stdin = process
            .stdin
            .take()
            .ok_or_else(missing)
            .map_err(spawn_error)?;
        let stdout = process
            .stdout
            .take()
            .ok_or_else(missing)
            .map_err(spawn_error)?;
        let stderr = process
            .stderr
            .take()
            .ok_or_else(missing)
            .map_err(spawn_error)?;
        tracing::debug!(server = %config.name, ?pid, program = %program.display(), root = %root.display(), "spawned language server");

        let (writer, _) = stdin
            .into_owned_fd()
            .and_then(|stdin| FrameWriter::direct(&config.name, stdin))
            .map_err(spawn_error)?;
        // On a thread, the output needs a blocking descriptor.
        let stdout = if config.output_thread {
            let fd = stdout
                .into_owned_fd()
                .and_then(|stdout| set_blocking(&stdout).map(|()| stdout))
                .map_err(spawn_error)?;
            Output::Thread(fd)
        } else {
            Output::Task(stdout)
        };
        let shared = Arc::new(Shared {
            server: config.name.clone(),
            pid,
            next_id: AtomicI64::new(FIRST_OWN_ID),
            pending: Mutex::new(PendingTable {
                closed: None,
                requests: HashMap::new(),
                forwarded: HashMap::new(),
                sweeping: false,
                sweep_until: None,
            }),
            writer,
            cancel_grace: config.cancel_grace,
            sweep: tokio::sync::Notify::new(),
            runtime: tokio::runtime::Handle::current(),
            stderr_tail: Mutex::new(VecDeque::new()),
            stderr_done: watch::channel(false).0,
            closed: watch::channel(None).0,
            exit_status: watch::channel(None).0,
            liveness: liveness::Liveness::new(&config.name, pid, config.hung_timeout),
            notification_sink: Mutex::new(None),
            request_handler: std::sync::RwLock::new(None),
            undelivered: Mutex::new(None),
        });
        let (incoming_tx, incoming_rx) = mpsc::channel(INCOMING_QUEUE);
        let (kill_tx, kill_rx) = oneshot::channel();
        tokio::spawn(stderr_loop(shared.clone(), stderr));
        match stdout {
            Output::Thread(stdout) => {
                let shared = shared.clone();
                let reader = std::thread::Builder::new()
                    .name(format!("{}-output", config.name))
                    .spawn(move || read_output(shared, stdout, incoming_tx));
                if let Err(error) = reader {
                    let _ = process.start_kill();
                    return Err(spawn_error(error));
                }
            }
            Output::Task(stdout) => {
                tokio::spawn(read_output_task(shared.clone(), stdout, incoming_tx));
            }
        }
        tokio::spawn(watch_process(shared.clone(), process, kill_rx));
        Ok((
            Transport {
                shared,
                kill: Mutex::new(Some(kill_tx)),
            },
            incoming_rx,
        ))
    }
}
