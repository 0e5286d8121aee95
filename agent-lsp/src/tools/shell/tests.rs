//! The `shell` tool through real `sh` processes: exit codes and streams, timeouts, the
//! deny-list, and what a command leaves behind.

use super::*;
use crate::tools::testing::{Fixture, run};

#[tokio::test]
async fn runs_in_the_workspace_root_with_exit_code_and_both_streams() {
    let fx = Fixture::new();
    fx.file("here.txt", "");
    let out = run(
        &Shell,
        &fx,
        json!({"command": "ls here.txt; echo oops >&2; exit 3"}),
    )
    .await;
    assert_eq!(
        out.text,
        "exit code: 3\n--- stdout ---\nhere.txt\n--- stderr ---\noops\n"
    );
    assert!(out.is_error);
    assert_eq!(out.meta["exit_code"], 3);
    let out = run(&Shell, &fx, json!({"command": "true"})).await;
    assert_eq!(out.text, "exit code: 0\n(no output)\n");
    assert!(!out.is_error);
}

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group() {
    let fx = Fixture::new();
    let started = Instant::now();
    let out = run(
        &Shell,
        &fx,
        json!({"command": "echo started; (sleep 2; touch late.txt) & sleep 30", "timeout_secs": 1}),
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert!(out.is_error);
    assert!(
        out.text.starts_with("error: timed out after 1 s"),
        "{}",
        out.text
    );
    assert!(
        out.text.contains("--- stdout ---\nstarted\n"),
        "{}",
        out.text
    );
    assert_eq!(out.meta["timed_out"], true);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !fx.root().join("late.txt").exists(),
        "the background child survived"
    );
}

#[tokio::test]
async fn background_processes_do_not_hold_the_call_open() {
    let fx = Fixture::new();
    let started = Instant::now();
    let out = run(&Shell, &fx, json!({"command": "sleep 30 & echo done"})).await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out.text, "exit code: 0\n--- stdout ---\ndone\n");
}

#[tokio::test]
async fn long_output_keeps_head_and_tail() {
    let fx = Fixture::new();
    let out = run(&Shell, &fx, json!({"command": "seq 1 100000"})).await;
    assert_eq!(out.meta["stdout_bytes"], 588895);
    assert!(
        out.text.contains("--- stdout ---\n1\n2\n3\n"),
        "{}",
        &out.text[..50]
    );
    assert!(out.text.ends_with("99999\n100000\n"));
    assert!(out.text.contains("bytes of output cut here"));
    assert!(out.text.len() < SHELL_CAPTURE_BYTES + 200);
}

#[tokio::test]
async fn cancellation_kills_the_command() {
    let fx = Fixture::new();
    let ctx = fx.context();
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let out =
        crate::plugin::tool::Tool::run(&Shell, ctx, json!({"command": "sleep 30"}).into()).await;
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(out.text.starts_with("cancelled:"), "{}", out.text);
    assert_eq!(out.meta["cancelled"], true);
}

#[test]
fn the_deny_list_catches_destructive_commands_only() {
    for command in [
        "rm -rf /",
        "rm -rf / ",
        "sudo rm -rf /*",
        "rm -fr ~",
        "rm -r -f $HOME/",
        "cd x && rm -rf ..",
        "rm -rf --no-preserve-root /",
        "mkfs.ext4 /dev/sda1",
        "dd if=/dev/zero of=/dev/sda bs=1M",
        "echo x > /dev/nvme0n1",
        ":(){ :|:& };:",
        "shutdown -h now",
        "chmod -R 777 /",
    ] {
        assert!(denied(command).is_some(), "{command:?} not denied");
    }
    for command in [
        "rm -rf build/",
        "rm -rf ./target",
        "rm file.txt",
        "ls /",
        "echo rm -rf",
        "cargo test -- --nocapture",
        "dd if=a of=b",
        "grep -R shutdown src/",
        "chmod -R 755 scripts",
    ] {
        assert!(
            denied(command).is_none(),
            "{command:?} denied: {:?}",
            denied(command)
        );
    }
}
